(function () {
  const form = document.getElementById("say");
  const chat = form.dataset.chat, csrf = form.dataset.csrf;
  const box = document.getElementById("lines");
  function add(who, text, bot) {
    const line = document.createElement("div");
    line.className = "line" + (bot ? " bot" : "");
    const name = document.createElement("div");
    name.className = "muted";
    name.textContent = who;
    const words = document.createElement("div");
    words.className = "text";
    words.textContent = text;
    line.append(name, words);
    box.append(line);
    line.scrollIntoView({block: "end"});
  }
  const events = new EventSource("/pallas/sandbox/" + encodeURIComponent(chat) + "/events");
  events.onmessage = function (event) { add("机器人", JSON.parse(event.data).text, true); };
  // Enter sends; Shift+Enter starts a new line, which the line keeps.
  document.getElementById("text").addEventListener("keydown", function (event) {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      form.requestSubmit();
    }
  });
  form.addEventListener("submit", async function (event) {
    event.preventDefault();
    const member = document.getElementById("member");
    const text = document.getElementById("text");
    const body = {member: member.value, name: member.selectedOptions[0].text,
                  text: text.value, at_bot: document.getElementById("at").checked};
    const answer = await fetch("/pallas/sandbox/" + encodeURIComponent(chat) + "/say", {
      method: "POST", headers: {"Content-Type": "application/json", "X-CSRF-Token": csrf},
      body: JSON.stringify(body)});
    document.getElementById("error").textContent = answer.ok ? "" : "没发出去（" + answer.status + "）";
    if (answer.ok) { add(body.name, (body.at_bot ? "@机器人 " : "") + body.text, false); text.value = ""; }
  });
})();
