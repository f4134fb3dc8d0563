// The slang page: drawn from /pallas/api/slang (pallas/product/slang/console.py).
(function () {
  const page = window.pallasPage;  // the console's shared helpers (owner_page.js)
  const root = page.root, api = page.api;
  const send = page.send, node = page.node, say = page.say;
  const day = (iso) => iso ? iso.slice(0, 10) : "";
  function quoted(lines) {
    return lines.map((l) => "#" + l.id + " " + (l.text === null ? "（已不在记录里）" : l.text)).join("\n");
  }
  function termRow(g, t) {
    const state = t.source === "deleted" ? "已删，不再学" : t.meaning === null ? "还在留意" :
      (t.source === "admin" ? "管理员教的" : "学到的") + "，" + day(t.learned_at);
    const text = t.term + "：" + (t.meaning || "—") + "（" + state + "；" + t.lines + " 条，" +
      t.members + " 人；最近用到 " + (day(t.last_used_at) || "没有") + "）";
    const from = node("pre", {className: "muted", textContent: quoted(t.learned_from.length ? t.learned_from : t.evidence)});
    const drop = node("button", {textContent: "删掉", className: "quiet", id: "drop-" + t.id, onclick: async () => {
      const answer = await send(api + "/slang/" + g + "/terms?term=" + encodeURIComponent(t.term), {method: "DELETE"});
      say(answer.ok ? "删掉了" : "没成（" + answer.status + "）", !answer.ok);
      if (answer.ok) open(g);
    }});
    return node("div", {className: "line"}, [node("span", {textContent: text}), drop, from]);
  }
  function sampleRow(s) {
    const drop = node("button", {textContent: "不要这句", className: "quiet", id: "sample-" + s.id, onclick: async () => {
      const answer = await send(api + "/slang/samples/" + s.id, {method: "DELETE"});
      say(answer.ok ? "去掉了" : "没成（" + answer.status + "）", !answer.ok);
      if (answer.ok) document.getElementById("sample-" + s.id).parentElement.remove();
    }});
    return node("div", {className: "line"}, [node("span", {textContent: "「" + s.text + "」 接的是「" +
      s.cue + "」（分量 " + s.weight + "，" + day(s.kept_at) + "）"}), drop]);
  }
  async function teach(event, g) {
    event.preventDefault();
    const body = {term: document.getElementById("term").value, meaning: document.getElementById("meaning").value};
    const answer = await send(api + "/slang/" + g + "/terms", {method: "PUT", body: JSON.stringify(body),
      headers: {"Content-Type": "application/json"}});
    say(answer.ok ? "记住了" : "没成（" + answer.status + "）", !answer.ok);
    if (answer.ok) open(g);
  }
  async function open(g) {
    const answer = await send(api + "/slang/" + g, {});
    if (!answer.ok) { say("打不开（" + answer.status + "）", true); return; }
    const found = await answer.json();
    const form = node("form", {onsubmit: (e) => teach(e, g)}, [node("input", {id: "term", placeholder: "词"}),
      node("input", {id: "meaning", placeholder: "在这个群里的意思"}), node("button", {textContent: "教它 / 改正"})]);
    const terms = found.terms.map((t) => termRow(g, t));
    const samples = found.samples.map(sampleRow);
    if (!terms.length) terms.push(node("p", {className: "muted", textContent: "还没有。"}));
    if (!samples.length) samples.push(node("p", {className: "muted", textContent: "还没有。"}));
    document.getElementById("shown").replaceChildren(node("h2", {textContent: found.name}), form,
      node("h3", {textContent: "词"}), ...terms, node("h3", {textContent: "大家接话的样子"}), ...samples);
  }
  async function draw() {
    const answer = await send(api + "/slang", {});
    const found = answer.ok ? (await answer.json()).groups : [];
    const rows = found.map((g) => node("div", {className: "line"}, [
      node("span", {textContent: (g.name || g.group) + "（" + g.group + "）：" + g.terms + " 个词，" + g.samples + " 句样子"}),
      node("button", {textContent: "看", className: "quiet", id: "open-" + g.stream_id, onclick: () => open(g.stream_id)})]));
    if (!rows.length) rows.push(node("p", {className: "muted", textContent: "还没从哪个群学到东西。"}));
    document.getElementById("groups").replaceChildren(...rows);
  }
  root.replaceChildren(node("p", {id: "said"}), node("h2", {textContent: "各群"}), node("div", {id: "groups"}),
    node("div", {id: "shown"}));
  draw();
})();
