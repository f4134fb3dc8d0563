from __future__ import annotations

import nonebot
import pytest
from nonebug.mixin import driver as nonebug_driver

from pallas.platform.onebot.adapter import PallasOneBotAdapter

pytest_plugins = ["tests.support.fixtures", "tests.support.frame_boundary"]


@pytest.fixture(scope="session", autouse=True)
async def after_nonebot_init(after_nonebot_init: None) -> None:
    """nonebug's hook: register the adapter and load the plugins under test in-process."""
    nonebot.get_driver().register_adapter(PallasOneBotAdapter)
    # Mutation testing (mutmut) runs pytest more than once in one process: nonebug never
    # clears its test client, and a plugin can be loaded only once.
    nonebug_driver._global_client = None
    if nonebot.get_plugin("ingress") is None:
        nonebot.load_plugin("packages.ingress")
