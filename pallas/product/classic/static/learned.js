// The learned lines page: drawn from /pallas/api/learned (pallas/product/classic/console.py).
(function () {
  const page = window.pallasPage;  // the console's shared helpers (owner_page.js)
  const root = page.root, api = page.api;
  const send = page.send, node = page.node, say = page.say;
  async function act(url, method, done) {
    const answer = await send(url, {method: method});
    say(answer.ok ? done : "没成（" + answer.status + "）", !answer.ok);
    if (answer.ok) draw();
  }
  function pairRow(pair) {
    const words = pair.context + " → " + pair.answer + "（" + pair.count + " 次，" + pair.answerers + " 人）";
    const ban = node("button", {textContent: "禁掉", id: "ban-" + pair.id,
      onclick: () => act(api + "/learned/pairs/" + pair.id + "/ban", "POST", "禁掉了")});
    const drop = node("button", {textContent: "删掉", className: "quiet", id: "forget-" + pair.id,
      onclick: () => act(api + "/learned/pairs/" + pair.id, "DELETE", "删掉了")});
    const chat = node("a", {href: "/pallas/chats/" + pair.stream_id, textContent: "哪个群"});
    return node("div", {className: "line"}, [node("span", {textContent: words}), ban, drop, chat]);
  }
  function banRow(ban) {
    const where = ban.everywhere ? "（各群都禁）" : "";
    const lift = node("button", {textContent: "解禁", id: "lift-" + ban.id,
      onclick: () => act(api + "/learned/bans/" + ban.id, "DELETE", "解禁了")});
    return node("div", {className: "line"}, [
      node("span", {textContent: ban.context + " → " + ban.answer + where}), lift]);
  }
  async function draw() {
    const answer = await send(api + "/learned", {});
    const found = answer.ok ? await answer.json() : {pairs: [], bans: []};
    const pairs = document.getElementById("pairs"), bans = document.getElementById("bans");
    pairs.replaceChildren(...found.pairs.map(pairRow));
    bans.replaceChildren(...found.bans.map(banRow));
    if (!found.pairs.length) pairs.append(node("p", {className: "muted", textContent: "还没学会什么。"}));
    if (!found.bans.length) bans.append(node("p", {className: "muted", textContent: "没有禁句。"}));
  }
  root.replaceChildren(node("p", {id: "said"}), node("h2", {textContent: "学会的"}),
    node("div", {id: "pairs"}), node("h2", {textContent: "禁句"}), node("div", {id: "bans"}));
  draw();
})();
