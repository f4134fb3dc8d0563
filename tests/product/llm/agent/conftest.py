"""The agent in-process on a real store, talking to the fake model server (harness.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from pallas.app import Runtime
from tests.product.llm.agent.harness import CHAT_MODEL, RecordingOutlet, start_agent
from tests.support.fake_llm import FakeModelServer


@pytest.fixture
def outlet() -> RecordingOutlet:
    return RecordingOutlet()


@pytest.fixture
async def runtime(
    tmp_path: Path, store_url: str, model_server: FakeModelServer, outlet: RecordingOutlet
) -> AsyncIterator[Runtime]:
    """The agent with one chat model, `CHAT_MODEL`, served by `model_server`."""
    runtime = await start_agent(
        tmp_path, store_url, outlet=outlet, llm_base_url=model_server.base_url, llm_model=CHAT_MODEL
    )
    yield runtime
    await runtime.stop()
