"""The bot as the end-to-end tests of a feature start it: its own folder and agent file, the
fake model server as its one chat model, and whatever else the test puts in its environment."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path

from tests.support.bot_process import BotProcess, running
from tests.support.fake_llm import FakeModelServer
from tests.support.fixtures import ACCESS_TOKEN

NO_MEMORY = "memory:\n  enabled: false\n"


@asynccontextmanager
async def bot_with_model(
    workdir: Path,
    model: FakeModelServer,
    model_name: str,
    *,
    agent_file: str = NO_MEMORY,
    env: Mapping[str, str] | None = None,
) -> AsyncIterator[BotProcess]:
    (workdir / "config").mkdir(parents=True, exist_ok=True)
    (workdir / "config" / "agent.yml").write_text(agent_file, encoding="utf-8")
    settings = {
        "LLM_BASE_URL": model.base_url,
        "LLM_MODEL": model_name,
        "LLM_API_KEY": "sk-e2e",
        **(env or {}),
    }
    async with running(BotProcess(workdir, token=ACCESS_TOKEN, env=settings)) as process:
        yield process
