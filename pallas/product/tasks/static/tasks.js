// The tasks page: drawn from /pallas/api/tasks (pallas/product/tasks/console.py).
(function () {
  const page = window.pallasPage;  // the console's shared helpers (owner_page.js)
  const root = page.root, api = page.api;
  const send = page.send, node = page.node, say = page.say;
  async function act(url, done) {
    const answer = await send(url, {method: "DELETE"});
    say(answer.ok ? done : "没成（" + answer.status + "）", !answer.ok);
    if (answer.ok) draw();
  }
  function chat(streamId) {
    return node("a", {href: "/pallas/chats/" + streamId, textContent: "哪个聊天"});
  }
  function reminderRow(r) {
    const when = r.due_at.slice(0, 16).replace("T", " ") + (r.repeat ? "（" + r.repeat + "）" : "");
    const cancel = node("button", {textContent: "取消", id: "cancel-reminder-" + r.id,
      onclick: () => act(api + "/tasks/reminders/" + r.id, "取消了")});
    return node("div", {className: "line"}, [
      node("span", {textContent: "#" + r.id + " " + when + " 给 " + r.user_id + "：" + r.text}),
      cancel, chat(r.stream_id)]);
  }
  function researchRow(r) {
    const parts = [node("span", {textContent: "#" + r.id + " " + r.status_words + "：" + r.question +
      "（" + r.user_id + "，" + r.asked_at.slice(0, 16).replace("T", " ") + "）"})];
    if (r.status === "running") {
      parts.push(node("button", {textContent: "取消", id: "cancel-research-" + r.id,
        onclick: () => act(api + "/tasks/research/" + r.id, "取消了")}));
    }
    parts.push(chat(r.stream_id));
    return node("div", {className: "line"}, parts);
  }
  async function draw() {
    const answer = await send(api + "/tasks", {});
    const found = answer.ok ? await answer.json() : {reminders: [], research: []};
    const reminders = document.getElementById("reminders");
    const research = document.getElementById("research");
    reminders.replaceChildren(...found.reminders.map(reminderRow));
    research.replaceChildren(...found.research.map(researchRow));
    if (!found.reminders.length) reminders.append(node("p", {className: "muted", textContent: "没有待提醒的事。"}));
    if (!found.research.length) research.append(node("p", {className: "muted", textContent: "还没人让我查过什么。"}));
  }
  root.replaceChildren(node("p", {id: "said"}), node("h2", {textContent: "待提醒"}),
    node("div", {id: "reminders"}), node("h2", {textContent: "后台查资料"}), node("div", {id: "research"}));
  draw();
})();
