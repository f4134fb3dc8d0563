"""`python -m pallas doctor` as an owner runs it: a real child process against the real bot,
the fake model server and the fake NapCat; each problem named with what to do."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from pallas.console.doctor import Finding, line_of, platform_finding, report
from tests.support.bot_process import REPO_ROOT, BotProcess
from tests.support.fake_llm import FakeModelServer, Reply, Stall, Status
from tests.support.fake_napcat import FakeNapCat
from tests.support.fixtures import ACCESS_TOKEN

SELF_ID = 46_801
CHAT = "doctor-chat"


async def doctor(workdir: Path, env: dict[str, str], *args: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "pallas", "doctor", *args,
        cwd=workdir, env={**env, "PYTHONPATH": str(REPO_ROOT)},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(process.communicate(), 120)
    return int(process.returncode or 0), out.decode()


async def doctor_of_a_running_bot(
    workdir: Path, model: FakeModelServer, unanswered: frozenset[str] = frozenset()
) -> tuple[int, str]:
    """The doctor against a bot that runs, with a fake NapCat connected that never answers
    the actions in `unanswered`."""
    env = {"LLM_BASE_URL": model.base_url, "LLM_MODEL": CHAT, "LLM_API_KEY": "sk-doctor"}
    bot = BotProcess(workdir, token=ACCESS_TOKEN, env=env)
    bot.start()
    try:
        await bot.wait_ready()
        napcat = FakeNapCat(bot.ws_url, SELF_ID, ACCESS_TOKEN)
        napcat.unanswered.update(unanswered)
        await napcat.connect()
        try:
            return await doctor(workdir, bot.env())
        finally:
            await napcat.close()
    finally:
        bot.stop()


@pytest.fixture
async def model() -> AsyncIterator[FakeModelServer]:
    async with FakeModelServer(default=Reply("pong")) as server:
        yield server


async def test_everything_fine_is_said_so_and_exits_0(
    tmp_path: Path, model: FakeModelServer
) -> None:
    code, out = await doctor_of_a_running_bot(tmp_path, model)
    assert code == 0, out
    assert f"✓ 模型 {CHAT}（chat、tool）能用" in out
    assert "结构是最新的" in out
    assert f"NapCat 已连接：账号 {SELF_ID}（NapCat.Onebot 4.x），能用：戳一戳、表情回应" in out
    # Configured by environment variables alone: no .env, a reminder that does not fail.
    assert out.startswith("! 没有找到 .env：用的是环境变量和默认值")
    assert out.strip().endswith("都没问题，另有 1 处提醒。")
    ping = model.requests_for(CHAT)[-1].body
    assert ping["max_tokens"] == 1  # one tiny call, not a conversation


async def test_a_napcat_that_never_says_what_it_is_is_named_with_what_to_do(
    tmp_path: Path, model: FakeModelServer
) -> None:
    code, out = await doctor_of_a_running_bot(tmp_path, model, frozenset({"get_version_info"}))
    assert code == 1, out
    assert f"✗ NapCat 已连接：账号 {SELF_ID}，但它没回答 get_version_info" in out
    assert "看一下 NapCat 的日志和版本" in out


def test_an_implementation_it_does_not_know_is_fine_without_platform_actions() -> None:
    unknown = platform_finding("42", {"implementation": "SomeBridge 1.0", "capabilities": []})
    assert unknown.ok and "（SomeBridge 1.0）" in unknown.what and "不会用" in unknown.what
    assert not platform_finding("42", {}).ok  # nothing reported: asked, no answer yet


async def test_a_model_that_refuses_and_no_running_bot_are_named_with_what_to_do(
    tmp_path: Path, model: FakeModelServer
) -> None:
    model.script(CHAT, Status(401, "bad key"))
    env = {
        "LLM_BASE_URL": model.base_url,
        "LLM_MODEL": CHAT,
        "LLM_API_KEY": "sk-wrong",
        "HOST": "127.0.0.1",
        "PORT": "1",  # nothing listens there
        "PALLAS_DATA_DIR": str(tmp_path / "data"),
    }
    code, out = await doctor(tmp_path, env)
    assert code == 1, out
    assert f"✗ 模型 {CHAT}（chat、tool）调用失败" in out
    assert f"检查 .env 里的 LLM_BASE_URL（{model.base_url}）、LLM_API_KEY 和 LLM_MODEL" in out
    assert "quick" not in out  # a name the owner never set
    assert "✗ 机器人没有在 127.0.0.1:1 运行" in out and "python bot.py" in out
    assert "数据库还没有" in out and not (tmp_path / "data").exists()  # nothing written


async def test_a_bad_env_file_is_named_and_nothing_else_is_tried(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("PORT=not-a-number\n", encoding="utf-8")
    env = {"PATH": "/usr/bin:/bin"}
    code, out = await doctor(tmp_path, env)
    assert code == 1 and "✗ 配置（.env）有错" in out and "PORT" in out, out


def test_the_report_counts_what_needs_fixing() -> None:
    lines: list[str] = []
    code = report([Finding(True, "好"), Finding(False, "坏", "修")], lines.append)
    assert code == 1 and lines == ["✓ 好", "✗ 坏\n    怎么办：修", "有 1 处要处理。"]
    assert line_of(Finding(True, "好")) == "✓ 好"


async def test_misspelt_keys_are_named_with_the_key_meant(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text(
        "LLM_MODLE=deepseek-chat\nPORTT=8081\nPORT=1\nHOST=127.0.0.1\nNICKNAME=[\"牛牛\"]\n",
        encoding="utf-8",
    )
    code, out = await doctor(tmp_path, {"PATH": "/usr/bin:/bin"})
    assert out.startswith("✓ 配置（.env）读得懂"), out
    assert "! .env 里的 LLM_MODLE 没有谁会读：它不起作用\n    怎么办：是不是想写 LLM_MODEL？" in out
    assert "! .env 里的 PORTT 没有谁会读" in out and "是不是想写 PORT？" in out
    assert "NICKNAME 没有谁会读" not in out  # NoneBot's own key
    assert "另有 2 处提醒" in out and code == 1  # no model and no bot: those need fixing


async def test_a_hanging_model_shows_progress_and_is_given_up_at_the_timeout(
    tmp_path: Path, model: FakeModelServer
) -> None:
    model.script(CHAT, Stall())
    env = {"LLM_BASE_URL": model.base_url, "LLM_MODEL": CHAT, "LLM_API_KEY": "sk-x",
           "PORT": "1", "PALLAS_DATA_DIR": str(tmp_path / "data")}  # fmt: skip
    code, out = await doctor(tmp_path, env, "--timeout", "0.5")
    assert f"正在试模型 {CHAT}（最多等 0.5 秒）……\n✗ 模型 {CHAT}（chat、tool）0.5 秒没有回答" in out
    assert code == 1


async def test_json_for_scripts(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("LLM_MODLE=x\nPORT=1\n", encoding="utf-8")
    code, out = await doctor(tmp_path, {"PATH": "/usr/bin:/bin"}, "--json")
    found = json.loads(out)
    assert code == 1 and found["ok"] is False
    statuses = {item["status"] for item in found["findings"]}
    assert statuses == {"ok", "warn", "problem"}
    assert any("LLM_MODEL" in item["fix"] for item in found["findings"] if item["status"] == "warn")
