// What every feature's own page shares (templates/owner_page.html loads it before the
// feature's script): the page's root, its API, a fetch with the session's CSRF value, an
// element maker (text only, never markup) and the line that says how an action went.
window.pallasPage = (function () {
  const root = document.getElementById("owner-page");
  const csrf = root.dataset.csrf;
  function send(url, options) {
    const given = options || {};
    return fetch(url, Object.assign({credentials: "same-origin"}, given,
      {headers: Object.assign({"X-CSRF-Token": csrf}, given.headers || {})}));
  }
  function node(tag, props, children) {
    const element = Object.assign(document.createElement(tag), props || {});
    (children || []).forEach((child) => element.append(child));
    return element;
  }
  function say(text, bad) {
    const line = document.getElementById("said");
    line.textContent = text;
    line.className = bad ? "problem" : "saved";
  }
  return {root: root, api: root.dataset.api, send: send, node: node, say: say};
})();
