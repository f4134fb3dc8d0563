"""The health report served at GET /pallas/api/health."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from pydantic import BaseModel

from pallas.platform.onebot.outlet import PlatformInfo


class Platform(BaseModel):
    """The implementation behind one connected account; `capabilities` None while unknown
    (its get_version_info has not answered yet)."""

    implementation: str
    capabilities: list[str] | None


class HealthReport(BaseModel):
    ok: bool
    bots: list[str]
    database: str
    model_chat: bool
    platforms: dict[str, Platform] = {}


def health_report(
    bot_ids: Iterable[str],
    database: str,
    model_chat: bool,
    platform_of: Callable[[str], PlatformInfo | None] = lambda _: None,
) -> HealthReport:
    bots = sorted(bot_ids)
    platforms = {bot: described(info) for bot in bots if (info := platform_of(bot)) is not None}
    return HealthReport(
        ok=True, bots=bots, database=database, model_chat=model_chat, platforms=platforms
    )


def described(info: PlatformInfo) -> Platform:
    known = None if info.capabilities is None else sorted(info.capabilities)
    return Platform(implementation=info.implementation, capabilities=known)
