// The sticker page: drawn from /pallas/api/stickers (pallas/product/media/console.py).
(function () {
  const page = window.pallasPage;  // the console's shared helpers (owner_page.js)
  const root = page.root, api = page.api + "/stickers";
  const send = page.send, node = page.node, say = page.say;
  function row(sticker) {
    const caption = node("input", {type: "text", value: sticker.caption, maxLength: 80,
                                   id: "caption-" + sticker.sha256.slice(0, 12)});
    const rename = node("button", {textContent: "改说明", id: "rename-" + sticker.sha256.slice(0, 12),
      onclick: async () => {
        const answer = await send(api + "/" + sticker.sha256, {method: "PUT",
          headers: {"Content-Type": "application/json"}, body: JSON.stringify({caption: caption.value})});
        say(answer.ok ? "改好了" : "没改成（" + answer.status + "）", !answer.ok);
      }});
    const remove = node("button", {textContent: "移除", className: "quiet",
      id: "remove-" + sticker.sha256.slice(0, 12),
      onclick: async () => {
        const answer = await send(api + "/" + sticker.sha256, {method: "DELETE"});
        say(answer.ok ? "移除了" : "没移除（" + answer.status + "）", !answer.ok);
        if (answer.ok) draw();
      }});
    const picture = node("img", {src: api + "/" + sticker.sha256 + "/file", alt: sticker.caption,
                                 className: "sticker"});
    return node("div", {className: "line sticker-row"}, [picture, caption, rename, remove,
      node("div", {className: "muted", textContent: "用过 " + sticker.uses + " 次"})]);
  }
  async function draw() {
    const answer = await send(api, {});
    const list = document.getElementById("stickers");
    list.replaceChildren();
    const stickers = answer.ok ? await answer.json() : [];
    stickers.forEach((sticker) => list.append(row(sticker)));
    if (!stickers.length) list.append(node("p", {className: "muted", textContent: "还没有表情包：上传一张，或在群里用 /收藏表情 教它。"}));
  }
  const file = node("input", {type: "file", accept: "image/*", id: "file"});
  const words = node("input", {type: "text", maxLength: 80, id: "new-caption", placeholder: "它什么时候用，比如：开心、无语"});
  const add = node("button", {textContent: "上传", id: "upload", onclick: async () => {
    if (!file.files.length) { say("先选一张图片", true); return; }
    const answer = await send(api + "?caption=" + encodeURIComponent(words.value),
      {method: "POST", headers: {"Content-Type": file.files[0].type || "application/octet-stream"},
       body: file.files[0]});
    say(answer.ok ? "加进去了" : "没加成：" + ((await answer.json()).detail || answer.status), !answer.ok);
    if (answer.ok) { file.value = ""; words.value = ""; draw(); }
  }});
  root.replaceChildren(node("p", {id: "said"}), node("div", {id: "stickers"}),
    node("h2", {textContent: "上传一张"}), file, words, add);
  draw();
})();
