// The taught-behaviours page: drawn from /pallas/api/behaviors (pallas/product/memory/console.py).
(function () {
  const page = window.pallasPage;  // the console's shared helpers (owner_page.js)
  const root = page.root, api = page.api;
  const send = page.send, node = page.node, say = page.say;
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
