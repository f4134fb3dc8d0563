// The MCP page: drawn from /pallas/api/mcp (pallas/product/mcp/console.py).
(function () {
  const page = window.pallasPage;  // the console's shared helpers (owner_page.js)
  const root = page.root, api = page.api;
  const send = page.send, node = page.node;
  const STATES = {running: "在运行", starting: "正在连接", failed: "没连上", stopped: "已停止", off: "关着"};
  function serverBlock(s) {
    const state = STATES[s.state] || s.state;
    const where = (s.transport === "stdio" ? "命令 " : "地址 ") + s.where;
    const limits = (s.groups.length ? "只在群 " + s.groups.join("、") : "所有群") + (s.private ? "和私聊" : "，不在私聊");
    const lines = [
      node("h2", {textContent: s.name + "：" + state}),
      node("p", {className: "muted", textContent: where + "；" + limits + "；" + s.secrets + " 个密钥（不显示）"}),
    ];
    if (s.reason) lines.push(node("p", {textContent: "原因：" + s.reason + (s.restarts ? "（重试过 " + s.restarts + " 次）" : "")}));
    if (s.problem) lines.push(node("p", {textContent: "工具没能登记：" + s.problem}));
    if (s.left_out) lines.push(node("p", {textContent: "工具太多，还有 " + s.left_out + " 个没有用上"}));
    const tools = s.tools.map((t) => node("div", {className: "line"}, [
      node("span", {textContent: t.name + "（" + t.original + "）"})]));
    if (!tools.length) tools.push(node("p", {className: "muted", textContent: "还没有工具。"}));
    return node("section", {}, [...lines, ...tools]);
  }
  async function draw() {
    const answer = await send(api + "/mcp", {});
    const found = answer.ok ? await answer.json() : {file: "", servers: []};
    const list = found.servers.map(serverBlock);
    if (!list.length) list.push(node("p", {className: "muted", textContent: "没有配置 MCP 服务（" + found.file + "）。"}));
    root.replaceChildren(node("p", {textContent: "开关在「工具」页：每个服务是一个插件 mcp_<名字>。"}), ...list);
  }
  draw();
})();
