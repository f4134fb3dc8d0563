// The knowledge page: drawn from /pallas/api/knowledge (pallas/product/knowledge/console.py).
(function () {
  const page = window.pallasPage;  // the console's shared helpers (owner_page.js)
  const root = page.root, api = page.api;
  const send = page.send, node = page.node, say = page.say;
  function docRow(d) {
    const where = d.scope ? "群 " + d.scope : "所有聊天";
    const state = d.status === "indexed" ? d.chunks + " 段" : "没读：" + d.reason;
    const show = node("button", {textContent: "看内容", className: "quiet", id: "chunks-" + d.id,
      onclick: () => chunks(d)});
    const drop = node("button", {textContent: "删掉", id: "remove-" + d.id, onclick: async () => {
      const answer = await send(api + "/knowledge/docs/" + d.id, {method: "DELETE"});
      say(answer.ok ? "删掉了" : "没成（" + answer.status + "）", !answer.ok);
      if (answer.ok) draw();
    }});
    return node("div", {className: "line"}, [
      node("span", {textContent: d.path + "（" + where + "，" + state + "）"}), show, drop]);
  }
  async function chunks(d) {
    const answer = await send(api + "/knowledge/docs/" + d.id + "/chunks", {});
    const found = answer.ok ? (await answer.json()).chunks : [];
    document.getElementById("shown").replaceChildren(node("h2", {textContent: d.path}),
      ...found.map((c) => node("p", {textContent: (c.heading ? "【" + c.heading + "】" : "") + c.text})));
  }
  async function search(event) {
    event.preventDefault();
    const q = document.getElementById("q").value, group = document.getElementById("group").value;
    const url = api + "/knowledge/search?q=" + encodeURIComponent(q) + "&group=" + encodeURIComponent(group);
    const answer = await send(url, {});
    const found = answer.ok ? (await answer.json()).passages : [];
    const shown = found.map((p) => node("p", {textContent: "【" + p.path + (p.heading ? " › " + p.heading : "") +
      "】（" + Math.round(p.coverage * 100) + "%）" + p.text}));
    if (!shown.length) shown.push(node("p", {className: "muted", textContent: "什么也没找到。"}));
    document.getElementById("shown").replaceChildren(node("h2", {textContent: "找到的"}), ...shown);
  }
  async function upload(event) {
    event.preventDefault();
    const file = document.getElementById("file").files[0];
    if (!file) return;
    const group = document.getElementById("upload-group").value;
    const url = api + "/knowledge/files?name=" + encodeURIComponent(file.name) + "&group=" + encodeURIComponent(group);
    const answer = await send(url, {method: "POST", body: await file.arrayBuffer()});
    say(answer.ok ? "放进去了，一会儿就读好" : "没成（" + answer.status + "）", !answer.ok);
    if (answer.ok) setTimeout(draw, 1500);
  }
  async function draw() {
    const answer = await send(api + "/knowledge", {});
    const found = answer.ok ? await answer.json() : {folder: "", docs: []};
    const docs = document.getElementById("docs");
    docs.replaceChildren(...found.docs.map(docRow));
    if (!found.docs.length) docs.append(node("p", {className: "muted", textContent: "文件夹 " + found.folder + " 里还没有文档。"}));
  }
  const searchForm = node("form", {onsubmit: search}, [
    node("input", {id: "q", placeholder: "试着问一句"}),
    node("input", {id: "group", placeholder: "群号（不填：私聊）"}), node("button", {textContent: "找"})]);
  const uploadForm = node("form", {onsubmit: upload}, [
    node("input", {id: "file", type: "file", accept: ".md,.txt,.html,.htm,.pdf,.docx"}),
    node("input", {id: "upload-group", placeholder: "只给这个群（不填：所有聊天）"}),
    node("button", {textContent: "放进去（最多 1 MB）"})]);
  root.replaceChildren(node("p", {id: "said"}), node("h2", {textContent: "文档"}), node("div", {id: "docs"}),
    uploadForm, node("h2", {textContent: "试一试"}), searchForm, node("div", {id: "shown"}));
  draw();
})();
