// The taught-behaviours page: drawn from /pallas/api/behaviors (pallas/product/memory/console.py).
(function () {
  const root = document.getElementById("owner-page");
  const api = root.dataset.api, csrf = root.dataset.csrf;
  const send = (url, options) => fetch(url, Object.assign({credentials: "same-origin"}, options,
    {headers: Object.assign({"X-CSRF-Token": csrf}, (options || {}).headers || {})}));
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
  function row(rule) {
    const words = node("input", {type: "text", value: rule.text, maxLength: 300, id: "rule-" + rule.id});
    const save = node("button", {textContent: "改写", id: "reword-" + rule.id, onclick: async () => {
      const answer = await send(api + "/behaviors/" + rule.id, {method: "PUT",
        headers: {"Content-Type": "application/json"}, body: JSON.stringify({text: words.value})});
      say(answer.ok ? "改好了" : "没改成（" + answer.status + "）", !answer.ok);
    }});
    const drop = node("button", {textContent: "删掉", className: "quiet", id: "drop-" + rule.id,
      onclick: async () => {
        const answer = await send(api + "/memory/" + rule.id + "/forget", {method: "POST"});
        say(answer.ok ? "删掉了" : "没删掉（" + answer.status + "）", !answer.ok);
        if (answer.ok) draw();
      }});
    const chat = node("a", {href: "/pallas/chats/" + rule.stream_id, textContent: "在哪个群教的"});
    return node("div", {className: "line"}, [words, save, drop, node("div", {className: "muted"}, [chat])]);
  }
  async function draw() {
    const answer = await send(api + "/behaviors", {});
    const rules = answer.ok ? await answer.json() : [];
    const list = document.getElementById("rules");
    list.replaceChildren();
    rules.forEach((rule) => list.append(row(rule)));
    if (!rules.length) list.append(node("p", {className: "muted", textContent: "还没有哪个群教过规矩。"}));
  }
  root.replaceChildren(node("p", {id: "said"}), node("div", {id: "rules"}));
  draw();
})();
