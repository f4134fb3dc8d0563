"""`python -m pallas replay`: a chat's recorded window under the settings of the day or
proposed ones, sending nothing and calling no model (docs/cost.md, "The replay")."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.config import Settings
from pallas.product.replay.recorded import ChatRef, find_group
from pallas.product.replay.report import PriceOf, ReplayReport
from pallas.product.replay.run import ReplayError, checked_window, day_window, run_replay
from pallas.providers.catalog import Catalog, Pricing
from pallas.providers.providers_file import load_catalog
from pallas.store.engine import create_engine
from pallas.store.migrate import HEAD_REVISION, current_revision


def parse_changes(pairs: Sequence[str]) -> dict[str, Any]:
    """`name=value` pairs; a value is read as JSON when it is (0.1, true, ["00:30-08:00"])."""
    changes: dict[str, Any] = {}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        if not sep or not name.strip():
            raise ReplayError(f"看不懂 {pair!r}：要写成 名字=值，比如 ambient_probability=0.1")
        try:
            changes[name.strip()] = json.loads(raw)
        except json.JSONDecodeError:
            changes[name.strip()] = raw
    return changes


def window_of(day: str | None, since: str | None, until: str | None) -> tuple[datetime, datetime]:
    if day:
        return day_window(day)
    if not (since and until):
        raise ReplayError("要给出 --day，或者同时给出 --since 和 --until")
    try:
        start, end = datetime.fromisoformat(since), datetime.fromisoformat(until)
    except ValueError:
        raise ReplayError("时间看不懂：要写成 2026-12-05T08:00+08:00 这样") from None
    return checked_window(start, end)


def prices_of(settings: Settings) -> PriceOf:
    """Each model's prices in the providers file now (none when the file does not load)."""
    try:
        catalog = load_catalog(settings)
    except Exception:  # a broken file: the recorded costs still price the calls
        return lambda name: None
    return catalog_prices(catalog)


async def replay_group(
    settings: Settings,
    group: str,
    account: str | None,
    window: tuple[datetime, datetime],
    proposed: dict[str, Any],
) -> ReplayReport:
    engine = create_engine(settings.database_url)
    try:
        chat = await _one_chat(engine, group, account)
        return await run_replay(engine, chat, window, proposed, prices_of(settings))
    finally:
        await engine.dispose()


async def _one_chat(engine: AsyncEngine, group: str, account: str | None) -> ChatRef:
    async with engine.connect() as conn:
        revision = await conn.run_sync(current_revision)
    if revision != HEAD_REVISION:
        raise ReplayError("数据库还不是最新结构：先启动一次机器人（启动时会升级），再重放")
    chats = await find_group(engine, group, account)
    if not chats:
        raise ReplayError(f"没有群 {group} 的记录")
    if len(chats) > 1:
        accounts = "、".join(c.self_id for c in chats)
        raise ReplayError(f"群 {group} 里有几个机器人（{accounts}）：用 --account 选一个")
    return chats[0]


def catalog_prices(catalog: Catalog) -> PriceOf:
    """Each model's prices in the providers file the bot runs with."""

    def price_of(name: str) -> Pricing | None:
        model = catalog.model(name)
        return None if model is None else model.pricing

    return price_of


async def replay_in_console(
    engine: AsyncEngine, catalog: Catalog, asked: ReplayAsked
) -> ReplayReport:
    """The console's replay (its page and its API): the bot's own store and prices."""
    window = window_of(asked.day, asked.since, asked.until)
    proposed = parse_changes(asked.changes)
    chat = await _one_chat(engine, asked.group.strip(), asked.account or None)
    return await run_replay(engine, chat, window, proposed, catalog_prices(catalog))


@dataclass(frozen=True)
class ReplayAsked:
    group: str
    day: str | None = None
    since: str | None = None
    until: str | None = None
    account: str | None = None
    changes: tuple[str, ...] = ()
