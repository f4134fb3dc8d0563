from __future__ import annotations

import nonebot
import pytest

from pallas.platform.onebot.adapter import PallasOneBotAdapter

pytest_plugins = ["tests.support.fixtures", "tests.support.frame_boundary"]


@pytest.fixture(scope="session", autouse=True)
async def after_nonebot_init(after_nonebot_init: None) -> None:
    """nonebug's hook: register the adapter and load the plugins under test in-process."""
    nonebot.get_driver().register_adapter(PallasOneBotAdapter)
    nonebot.load_plugin("packages.ingress")
