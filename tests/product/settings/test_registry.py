"""The settings registry: a change is validated whole (every bad field named in Chinese,
nothing saved), only what differs from the defaults is stored, fields are described for
forms in the model's order, dynamic options are the bot's own; the sections stored in the
`setting` table on both backends, and the model choice handed to the model manager."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.product.conversation.delivery.pacing import DeliveryPolicy
from pallas.product.conversation.gate.policy import GatePolicy
from pallas.product.llm.agent.config import AgentConfig
from pallas.product.persona.config import FollowUpConfig, PromiseConfig
from pallas.product.persona.settings import FOLLOW_UP_TITLES, PROMISE_TITLES
from pallas.product.settings.agent_section import agent_section
from pallas.product.settings.applied import Live, applied_section
from pallas.product.settings.delivery_section import LivePacing, delivery_section
from pallas.product.settings.features import (
    Feature,
    FeatureGate,
    NoticeSettings,
    features_section,
    notices_section,
)
from pallas.product.settings.models_section import (
    ModelChoice,
    models_section,
)
from pallas.product.settings.registry import (
    FieldKind,
    Scope,
    Section,
    SettingsError,
    SettingsRegistry,
)
from pallas.product.settings.sections import GATE_TITLES
from pallas.providers.catalog import Catalog, ModelSpec, ModelType, ProviderSpec
from pallas.providers.manager import ManagerDeps, ModelManager
from pallas.store.setting_history import SettingHistory, in_force_at
from pallas.store.settings_table import SettingsTable

T0 = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


class MemoryStorage:
    def __init__(self) -> None:
        self.saved: dict[str, dict[str, Any]] = {}
        self.writes = 0

    async def load(self, scope_id: str) -> dict[str, Any]:
        return dict(self.saved.get(scope_id, {}))

    async def save(self, scope_id: str, stored: dict[str, Any], now: datetime) -> None:
        self.writes += 1
        self.saved[scope_id] = dict(stored)


def gate(storage: MemoryStorage) -> SettingsRegistry:
    registry = SettingsRegistry()
    registry.register(
        Section("gate", "什么时候开口", Scope.GROUP, GatePolicy, GatePolicy(), storage, GATE_TITLES)
    )
    return registry


async def test_a_change_is_stored_as_its_difference_from_the_defaults() -> None:
    storage = MemoryStorage()
    registry = gate(storage)
    values = await registry.update(
        "gate", "7", {"poke_limit": 1, "quiet_hours": ["00:30-08:00"]}, T0
    )
    assert storage.saved["7"] == {"poke_limit": 1, "quiet_hours": ("00:30-08:00",)}
    fields = {f.name: f for f in values.fields}
    assert fields["poke_limit"].value == 1 and fields["poke_limit"].overridden
    assert fields["quiet_hours"].value == ["00:30-08:00"]
    await registry.update("gate", "7", {"poke_limit": 3}, T0)  # back to the default
    assert storage.saved["7"] == {"quiet_hours": ("00:30-08:00",)}


@pytest.mark.parametrize(
    ("changes", "problems"),
    [
        ({"poke_limit": -1}, {"poke_limit": "不能小于 0"}),
        ({"ambient_probability": 2}, {"ambient_probability": "不能大于 1"}),
        ({"poke_window_s": 0}, {"poke_window_s": "要大于 0"}),
        ({"poke_limit": "many"}, {"poke_limit": "要填数字"}),
        ({"model_chat": "maybe"}, {"model_chat": "要填是或否"}),
        ({"timezone": "Mars/Base"}, {"timezone": "不认识的时区 'Mars/Base'"}),
        ({"nope": 1, "other": 2}, {"nope": "不是可以改的设置", "other": "不是可以改的设置"}),
    ],
)
async def test_a_bad_field_is_named_and_nothing_is_saved(
    changes: dict[str, Any], problems: dict[str, str]
) -> None:
    storage = MemoryStorage()
    registry = gate(storage)
    with pytest.raises(SettingsError) as refused:
        await registry.update("gate", "7", {"max_replies_in_window": 2, **changes}, T0)
    assert refused.value.problems == problems
    assert storage.writes == 0 and storage.saved == {}


async def test_every_bad_field_is_named_at_once() -> None:
    registry = gate(MemoryStorage())
    with pytest.raises(SettingsError) as refused:
        await registry.update("gate", "7", {"poke_limit": -1, "hot_min_speakers": 1}, T0)
    assert set(refused.value.problems) == {"poke_limit", "hot_min_speakers"}


async def test_fields_are_described_in_form_order_with_kinds_and_limits() -> None:
    values = await gate(MemoryStorage()).read("gate", "7")
    assert [f.name for f in values.fields] == list(GATE_TITLES)
    fields = {f.name: f for f in values.fields}
    assert fields["model_chat"].kind is FieldKind.BOOL
    assert fields["poke_limit"].kind is FieldKind.INT and fields["poke_limit"].minimum == 0
    assert fields["poke_window_s"].kind is FieldKind.FLOAT  # declared float, default 300
    assert fields["ambient_probability"].maximum == 1
    assert fields["quiet_hours"].kind is FieldKind.LIST
    assert fields["timezone"].kind is FieldKind.TEXT
    assert not any(f.overridden for f in values.fields)


async def test_an_unknown_section_is_refused() -> None:
    with pytest.raises(SettingsError):
        await gate(MemoryStorage()).read("nope", "1")
    registry = gate(MemoryStorage())
    with pytest.raises(ValueError, match="twice"):
        registry.register(registry.section("gate"))


def catalog(*names: str) -> Catalog:
    provider = ProviderSpec("p", "http://127.0.0.1:9", ("k",))
    models = tuple(
        ModelSpec(name, name, "p", frozenset({ModelType.CHAT, ModelType.TOOL})) for name in names
    )
    return Catalog(providers=(provider,), models=models)


async def test_the_model_choice_offers_the_models_the_bot_has_and_applies_them(
    engine: AsyncEngine,
) -> None:
    manager = ModelManager(catalog("fast", "smart"), ManagerDeps())
    registry = SettingsRegistry()
    table = SettingsTable(engine)
    registry.register(models_section(table, manager))
    fields = {f.name: f for f in (await registry.read("models", "global")).fields}
    assert fields["chat"].kind is FieldKind.CHOICE and fields["chat"].options == (
        "",
        "fast",
        "smart",
    )
    with pytest.raises(SettingsError) as refused:
        await registry.update("models", "global", {"chat": "gpt-imaginary"}, T0)
    assert refused.value.problems == {"chat": "不是可选的值"}
    await registry.update("models", "global", {"chat": "smart"}, T0)
    assert manager.candidates(ModelType.CHAT)[0].name == "smart"

    # The next start: the stored choice comes back, unless the model is gone.
    again = ModelManager(catalog("fast", "smart"), ManagerDeps())
    fresh = SettingsRegistry()
    fresh.register(models_section(SettingsTable(engine), again))
    await fresh.restore()
    assert again.candidates(ModelType.CHAT)[0].name == "smart"
    gone = ModelManager(catalog("fast"), ManagerDeps())
    without = SettingsRegistry()
    without.register(models_section(SettingsTable(engine), gone))
    await without.restore()  # a warning, and the automatic order
    assert [m.name for m in gone.candidates(ModelType.CHAT)] == ["fast"]
    assert ModelChoice().chat == ""


async def test_feature_switches_and_notices_live_in_the_setting_table(engine: AsyncEngine) -> None:
    table = SettingsTable(engine)
    registry = SettingsRegistry()
    registry.register(features_section(table))
    registry.register(notices_section(table))
    features = FeatureGate(table)
    assert await features.allows(5, Feature.MEMORY) and await features.notices(5) is None
    await registry.update("features", "5", {"memory": False}, T0)
    await registry.update("notices", "5", {"welcome": True, "welcome_text": "来啦 {at}"}, T0)
    assert not await features.allows(5, Feature.MEMORY)
    assert await features.allows(5, Feature.REPEAT)  # only what was switched
    assert await features.allows(6, Feature.MEMORY)  # only in that group
    assert await features.notices(5) == NoticeSettings(welcome=True, welcome_text="来啦 {at}")
    # Another process (a restart) reads the same from the table.
    reread = FeatureGate(SettingsTable(engine))
    assert not await reread.allows(5, Feature.MEMORY)
    with pytest.raises(SettingsError) as refused:
        await registry.update("notices", "5", {"welcome_text": ""}, T0)
    assert "welcome_text" in refused.value.problems


async def test_reply_limits_reach_the_agent_when_saved_and_at_every_start(
    engine: AsyncEngine,
) -> None:
    base = AgentConfig(max_bubbles=3)
    limits = Live(base)  # what the agent reads at every turn
    registry = SettingsRegistry()
    registry.register(agent_section(SettingsTable(engine), limits))
    assert registry.section("agent").current is limits
    fields = {f.name: f for f in (await registry.read("agent", "global")).fields}
    assert fields["max_bubbles"].default == 3  # the agent file gives the defaults
    with pytest.raises(SettingsError) as refused:
        await registry.update("agent", "global", {"max_bubbles": 11}, T0)
    assert refused.value.problems == {"max_bubbles": "不能大于 10"} and limits() is base
    await registry.update("agent", "global", {"max_bubbles": 1, "fallback_reply": "稍等"}, T0)
    assert (limits().max_bubbles, limits().fallback_reply) == (1, "稍等")
    assert limits().context_token_budget == base.context_token_budget  # the rest as it was

    later, restarted = SettingsRegistry(), Live(base)
    later.register(agent_section(SettingsTable(engine), restarted))
    assert restarted().max_bubbles == 3
    await later.restore()
    assert restarted().max_bubbles == 1


async def test_pacing_reaches_the_dispatcher_when_saved_and_at_every_start(
    engine: AsyncEngine,
) -> None:
    base = DeliveryPolicy(max_attempts=7)
    pacing = LivePacing(base)  # what the dispatcher reads at every send
    registry = SettingsRegistry()
    registry.register(delivery_section(SettingsTable(engine), pacing))
    with pytest.raises(SettingsError) as refused:
        await registry.update("delivery", "global", {"min_pause_s": 3, "max_pause_s": 2}, T0)
    assert list(refused.value.problems) == ["max_pause_s"] and pacing() is base
    assert "3 秒" in refused.value.problems["max_pause_s"]
    await registry.update("delivery", "global", {"min_pause_s": 2.5, "max_pause_s": 6}, T0)
    assert (pacing().min_pause_s, pacing().max_pause_s) == (2.5, 6)
    assert pacing().max_attempts == 7  # what the console does not show stays as it was
    assert pacing() is pacing()  # worked out once per change, not at every read

    restarted = LivePacing(base)
    later = SettingsRegistry()
    later.register(delivery_section(SettingsTable(engine), restarted))
    await later.restore()
    assert (restarted().min_pause_s, restarted().max_pause_s) == (2.5, 6)


async def test_pacing_stored_under_other_bounds_is_not_applied(engine: AsyncEngine) -> None:
    table = SettingsTable(engine)
    await table.save("delivery", "global", {"global_burst": 500}, T0)  # out of today's range
    pacing = LivePacing(DeliveryPolicy())
    registry = SettingsRegistry()
    registry.register(delivery_section(table, pacing))
    await registry.restore()
    assert pacing() == DeliveryPolicy()  # the defaults stand, and a warning says why


def follow_up_section(engine: AsyncEngine, live: Live[FollowUpConfig]) -> Section:
    table = SettingsTable(engine)
    return applied_section("follow_up", "私聊后", table, live, FOLLOW_UP_TITLES)


async def test_a_features_agent_file_config_as_a_section_is_read_as_saved_and_at_start(
    engine: AsyncEngine,
) -> None:
    base = FollowUpConfig(min_minutes=10, max_minutes=30)
    live = Live(base)
    registry = SettingsRegistry()
    registry.register(follow_up_section(engine, live))
    fields = {f.name: f for f in (await registry.read("follow_up", "global")).fields}
    assert (fields["min_minutes"].default, fields["enabled"].kind) == (10, FieldKind.BOOL)
    with pytest.raises(SettingsError) as refused:
        await registry.update("follow_up", "global", {"max_minutes": 5}, T0)
    assert refused.value.problems == {"max_minutes": "不能小于 min_minutes（10 分钟）"}
    assert live() is base
    await registry.update("follow_up", "global", {"enabled": False}, T0)
    assert live() == base.model_copy(update={"enabled": False})

    restarted = Live(base)
    later = SettingsRegistry()
    later.register(follow_up_section(engine, restarted))
    await later.restore()
    assert restarted().enabled is False


async def test_values_stored_under_other_bounds_are_not_applied_at_start(
    engine: AsyncEngine,
) -> None:
    table = SettingsTable(engine)
    await table.save("promises", "global", {"shown": 99}, T0)  # beyond today's 20
    live = Live(PromiseConfig())
    registry = SettingsRegistry()
    registry.register(applied_section("promises", "承诺", table, live, PROMISE_TITLES))
    await registry.restore()
    assert live() == PromiseConfig()


async def test_every_change_is_kept_with_what_it_replaced(engine: AsyncEngine) -> None:
    history = SettingHistory(engine)
    registry = SettingsRegistry(history)
    registry.register(delivery_section(SettingsTable(engine), LivePacing(DeliveryPolicy())))
    await registry.update("delivery", "global", {"account_per_minute": 10}, T0)
    await registry.update("delivery", "global", {"account_per_minute": 10}, T0)  # no change
    later = T0 + timedelta(hours=2)
    await registry.update("delivery", "global", {"account_per_minute": 30}, later)
    changes = await history.changes("delivery", "global")
    assert changes == [
        (T0, {}, {"account_per_minute": 10}),
        (later, {"account_per_minute": 10}, {"account_per_minute": 30}),
    ]
    now = {"account_per_minute": 30}
    assert in_force_at(changes, T0 - timedelta(days=1), now) == {}  # before the first change
    assert in_force_at(changes, T0 + timedelta(hours=1), now) == {"account_per_minute": 10}
    assert in_force_at(changes, later, now) == {"account_per_minute": 30}
    assert in_force_at([], T0, now) == now  # never changed since: as stored
