"""Start Pallas: `python bot.py` from the repository root."""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Awaitable, Callable, Iterable

import nonebot
import nonebot.log
from loguru import logger

from packages._runtime import install_runtime
from pallas.app import Runtime
from pallas.config import ConfigError, Settings, load_settings
from pallas.features import BUILT_IN_FEATURES
from pallas.logs import install_log_guard
from pallas.platform.http_server import server_options
from pallas.platform.onebot.adapter import PallasOneBotAdapter
from pallas.product.extensions import enabled
from pallas.store.failures import StoreFailure, StoreStartupError
from pallas.store.preflight import prepare_store

PLUGINS = (
    "packages.ingress",
    "packages.console",
)


def init_bot(settings: Settings, extra_plugins: Iterable[str] = ()) -> Runtime:
    """Initialise NoneBot, build the runtime and load the plugins; does not start serving."""
    nonebot.init(
        driver="~fastapi+~websockets+~httpx",
        host=settings.host,
        port=settings.port,
        onebot_access_token=settings.onebot_access_token or None,
        superusers=set(settings.superusers),
        nickname=set(settings.nickname),
    )
    # After init: NoneBot installs its own log patcher there, which the guard keeps.
    install_log_guard(getattr(nonebot, "_log_patcher", None))
    _log_at_configured_level()
    driver = nonebot.get_driver()
    driver.register_adapter(PallasOneBotAdapter)
    runtime = Runtime.build(settings, features=enabled(BUILT_IN_FEATURES, settings))
    install_runtime(runtime)
    driver.on_startup(runtime.start)
    driver.on_shutdown(stopper(runtime))
    for plugin in (*PLUGINS, *extra_plugins):
        nonebot.load_plugin(plugin)
    return runtime


def stopper(runtime: Runtime) -> Callable[[], Awaitable[None]]:
    """The shutdown hook (a coroutine function, as NoneBot requires)."""

    async def stop() -> None:
        await runtime.stop()
        if runtime.lease.lost:
            # Taken over while frozen (docs/scaling.md): exit 1, so that a supervisor starts
            # it again; uvicorn would end the process by the stop signal it sent itself.
            os._exit(1)

    return stop


def _log_at_configured_level() -> None:
    """NoneBot's console handler takes every level and drops records in a filter, so each
    log call below LOG_LEVEL still builds a whole record (a few percent of the CPU per
    message). Added again at LOG_LEVEL, such calls return before any work."""
    level = nonebot.get_driver().config.log_level
    logger.remove(nonebot.log.logger_id)
    nonebot.log.logger_id = logger.add(
        sys.stdout,
        level=level,
        diagnose=False,
        filter=nonebot.log.default_filter,
        format=nonebot.log.default_format,
    )


def serve(settings: Settings) -> None:
    """Run the server with its limits and trusted proxies set (docs/security.md)."""
    nonebot.run(**server_options(settings))


def main(extra_plugins: Iterable[str] = ()) -> None:
    try:
        settings = load_settings()
        runtime = init_bot(settings, extra_plugins)
        # Before the server binds: a store that cannot be used stops start-up here, with
        # nothing served and nothing half-migrated (docs/napcat.md, "When it will not start").
        prepare_store(settings.database_url, runtime.extensions.migrations)
    except ConfigError as exc:  # .env keys and the providers file alike
        print(f"pallas: cannot start, {exc}", file=sys.stderr)
        sys.exit(2)
    except StoreStartupError as exc:
        if exc.failure is StoreFailure.OTHER:  # no known cause: the traceback is the report
            traceback.print_exception(exc.__cause__ or exc, file=sys.stderr)
        print(f"pallas: cannot start, {exc}", file=sys.stderr)
        sys.exit(1)
    serve(settings)


if __name__ == "__main__":
    main()
