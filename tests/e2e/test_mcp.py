"""End to end: MCP servers from mcp.json started with the bot, their tools offered and called
in turns, the results reaching the model as tool data and never in the system role; a side
effect refused to a member; a server that dies comes back, one that cannot start is reported,
and the bot answers throughout (docs/mcp.md)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import httpx

from tests.support.bot_process import BotProcess
from tests.support.fake_llm import FakeModelServer, Reply, ToolCallSpec
from tests.support.fake_napcat import FakeNapCat, next_message_id
from tests.support.fixtures import ACCESS_TOKEN
from tests.support.mcp_town import INJECTED, NEEDLE
from tests.support.timeline_db import wait_for

SELF_ID, MEMBER = 64001, 6700
MODEL = "mcp-chat"
CONSOLE = "mcp-console-token"
TOWN = str(Path(__file__).resolve().parents[1] / "support" / "mcp_town.py")


class NapCat(FakeNapCat):
    def __init__(self, ws_url: str) -> None:
        super().__init__(ws_url, SELF_ID, ACCESS_TOKEN)
        self.responders["send_private_msg"] = lambda _params: {"message_id": next_message_id()}

    def texts(self) -> list[str]:
        return ["".join(s["data"].get("text", "") for s in p["message"])
                for p in self.calls_to("send_private_msg")]  # fmt: skip


def is_turn(body: dict[str, Any]) -> bool:
    return "reply" in {t["function"]["name"] for t in body.get("tools", [])}


def call(name: str, **arguments: Any) -> Reply:
    return Reply("", (ToolCallSpec(name, json.dumps(arguments, ensure_ascii=False)),))


def reply(text: str) -> Reply:
    return call("reply", text=text)


def mcp_file(tmp_path: Path) -> Path:
    servers = {
        "town": {"command": sys.executable, "args": [TOWN], "hints": ["嗯哼镇"],
                 "env": {"TOWN_SECRET": "s3cret-value"}},
        "town-two": {"command": sys.executable, "args": [TOWN], "disabled": True},
        "broken": {"command": str(tmp_path / "no-such-server")},
        "crowded": {"command": sys.executable, "args": [TOWN, "--tools", "500"]},
    }  # fmt: skip
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    return path


async def servers(http: httpx.AsyncClient) -> dict[str, dict[str, Any]]:
    found = (await http.get("/pallas/api/mcp")).json()
    return {s["name"]: s for s in found["servers"]}


async def test_mcp_tools_are_called_in_turns_and_a_dying_server_leaves_the_bot_answering(
    tmp_path: Path,
) -> None:
    async with FakeModelServer() as model:
        model.script_when(MODEL, is_turn,
                          call("mcp__town__lookup", question="镇长是谁"), reply("镇长是阿珍"),
                          call("mcp__town__huge"), reply("太长了"),
                          call("mcp__town__post_notice", text="开会"), reply("贴不了"),
                          call("mcp__town__die"), reply("服务好像挂了"),
                          call("mcp__town__lookup", question="再查"), reply("又好了"))  # fmt: skip
        env = {"LLM_BASE_URL": model.base_url, "LLM_MODEL": MODEL, "LLM_API_KEY": "sk-mcp",
               "PALLAS_MCP_FILE": str(mcp_file(tmp_path)),
               "PALLAS_CONSOLE_TOKEN": CONSOLE}  # fmt: skip
        bot = BotProcess(tmp_path, token=ACCESS_TOKEN, env=env)
        bot.start()
        await bot.wait_ready()
        napcat = await NapCat(bot.ws_url).connect()
        headers = {"Authorization": f"Bearer {CONSOLE}"}
        async with httpx.AsyncClient(base_url=bot.http_url, headers=headers) as http:

            async def state(name: str) -> str:
                return (await servers(http))[name]["state"]

            await wait_for_async(lambda: state("town"), "running", "the town server up")
            listed = await servers(http)
            assert listed["town-two"]["state"] == "off"
            assert listed["broken"]["state"] == "failed" or listed["broken"]["restarts"] >= 0
            assert "s3cret" not in json.dumps(listed) and listed["town"]["secrets"] == 1
            names = {t["original"]: t["name"] for t in listed["town"]["tools"]}
            assert names["lookup"] == "mcp.town.lookup"
            odd = next(n for o, n in names.items() if o.startswith("Get-Weather"))
            assert len(odd.replace(".", "__")) <= 64 and odd.startswith("mcp.town.get_weather")
            await wait_for_async(lambda: state("crowded"), "running", "the crowded server up")
            crowded = (await servers(http))["crowded"]
            assert len(crowded["tools"]) == 64 and crowded["left_out"] == 506 - 64
            # Two servers with the same tool: each under its own server's name.
            assert {"original": "lookup", "name": "mcp.crowded.lookup"} in crowded["tools"]

            async def ask(words: str, answer: str) -> None:
                await napcat.send_event(napcat.private_message(MEMBER, words))
                await wait_for(lambda: answer in napcat.texts(), timeout=30, what=answer)

            await ask("嗯哼镇的镇长是谁", "镇长是阿珍")
            turns = [r.body for r in model.requests_for(MODEL) if is_turn(r.body)]
            assert "mcp__town__lookup" in {t["function"]["name"] for t in turns[0]["tools"]}
            [tool] = [m for m in turns[1]["messages"] if m["role"] == "tool"]
            assert NEEDLE in tool["content"] and INJECTED in tool["content"]
            assert "不是指令" in tool["content"]
            assert all(NEEDLE not in str(m["content"]) for m in turns[1]["messages"]
                       if m["role"] == "system")  # fmt: skip

            await ask("嗯哼镇的大数据", "太长了")
            turns = [r.body for r in model.requests_for(MODEL) if is_turn(r.body)]
            huge = [m for m in turns[3]["messages"] if m["role"] == "tool"][-1]["content"]
            assert len(huge) < 10_000  # 10 MB came back; the model read a capped piece

            await ask("嗯哼镇贴个通知", "贴不了")
            turns = [r.body for r in model.requests_for(MODEL) if is_turn(r.body)]
            refused = [m for m in turns[5]["messages"] if m["role"] == "tool"][-1]["content"]
            assert "需要主人确认" in refused  # a side effect, asked by a member

            await ask("嗯哼镇服务还好吗", "服务好像挂了")  # the server exits mid-call
            await wait_for_async(lambda: restarted(http), True, "the town server back")
            await ask("嗯哼镇再查一次", "又好了")
            turns = [r.body for r in model.requests_for(MODEL) if is_turn(r.body)]
            again = [m for m in turns[9]["messages"] if m["role"] == "tool"][-1]["content"]
            assert NEEDLE in again
        await napcat.close()
        assert bot.stop() == 0


async def restarted(http: httpx.AsyncClient) -> bool:
    town = (await servers(http))["town"]
    return town["state"] == "running" and town["restarts"] >= 1


async def wait_for_async(check: Any, wanted: Any, what: str, timeout: float = 40) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while (found := await check()) != wanted:
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what} (last: {found!r})")
        await asyncio.sleep(0.2)
