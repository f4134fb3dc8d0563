"""The kernel and the agent in-process, on a real store, against the fake model server.

The platform side is a recording outlet: it "sends" by recording, then stores the bot's
message through the ingress like the OneBot outlet does after NapCat's receipt. The real
outlet is tested against NapCat's API in tests/platform and end to end in tests/e2e.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.app import KernelConfig, Runtime
from pallas.config import load_settings
from pallas.core.actions import HISTORY_UNREADABLE, Capability, SentLookup
from pallas.core.inbound import InboundMessage, Segment, StreamKey
from pallas.platform.onebot.send import own_message, utc_now
from pallas.product.conversation.delivery.dispatcher import OutboxDelivery, OutboxDispatcher
from pallas.product.conversation.delivery.pacing import DeliveryPolicy
from pallas.product.extensions import Extension
from pallas.product.llm.agent.agent_factory import build_agent_handler
from pallas.product.llm.agent.config import AgentConfig
from pallas.store.models import Event
from tests.support.waiting import until

CHAT_MODEL = "m-chat"  # the model the shared `runtime` fixture (conftest.py) configures
_platform_ids = itertools.count(900_000)
# No pauses: the tests look at what is sent, not at the pace
# (tests/product/conversation/delivery/test_outbox.py).
FAST = DeliveryPolicy(min_pause_s=0, max_pause_s=0, stream_interval_s=0, global_per_second=1e6)


@dataclass
class Sent:
    stream: StreamKey
    text: str
    quote: str | None
    platform_message_id: str


@dataclass
class RecordingOutlet:
    runtime: Runtime | None = None
    capability_set: frozenset[Capability] = frozenset()
    refuse: bool = False
    connected: bool = True
    sent: list[Sent] = field(default_factory=list)
    pokes: list[tuple[StreamKey, str]] = field(default_factory=list)
    reactions: list[tuple[str, str]] = field(default_factory=list)

    async def send(
        self, stream: StreamKey, segments: Sequence[Segment], quote: str | None = None
    ) -> str | None:
        if self.refuse:
            return None
        platform_id = str(next(_platform_ids))
        text = "".join(segment.text for segment in segments)
        self.sent.append(Sent(stream, text, quote, platform_id))
        assert self.runtime is not None
        await self.runtime.conversation.ingress.accept(
            own_message(stream, tuple(segments), platform_id, utc_now())
        )
        return platform_id

    async def poke(self, stream: StreamKey, user_id: str) -> bool:
        self.pokes.append((stream, user_id))
        return not self.refuse

    async def react(self, stream: StreamKey, platform_message_id: str, reaction: str) -> bool:
        self.reactions.append((platform_message_id, reaction))
        return not self.refuse

    async def capabilities(self, self_id: str) -> frozenset[Capability]:
        return self.capability_set

    async def is_connected(self, self_id: str) -> bool:
        return self.connected

    async def find_sent(self, stream: StreamKey, text: str, since: datetime) -> SentLookup:
        return HISTORY_UNREADABLE


async def start_agent(
    tmp_path: Path,
    store_url: str,
    *,
    outlet: RecordingOutlet,
    config: AgentConfig | None = None,
    before_start: Callable[[Runtime], None] | None = None,
    features: Sequence[Extension] = (),
    **settings: object,
) -> Runtime:
    overrides: dict[str, object] = {"pallas_providers_file": "", **settings}
    loaded = load_settings(
        env_file=None, pallas_data_dir=tmp_path, pallas_database_url=store_url, **overrides
    )
    runtime = Runtime.build(
        loaded, kernel=KernelConfig(delivery=FAST), handler=_Placeholder(), features=features
    )
    outlet.runtime = runtime
    # The dispatcher sends through the recording outlet instead of NapCat.
    delivery = runtime.delivery
    ledger = runtime.recorders.ledger
    delivery.dispatcher = OutboxDispatcher(delivery.outbox, outlet, ledger, FAST, utc_now)
    # What features send (core.sender) wakes this dispatcher, not the one it replaced: else
    # their rows wait for its idle look, half a minute.
    delivery.sender._dispatcher = delivery.dispatcher
    runtime.conversation.runner.handler = build_agent_handler(
        engine=runtime.engine,
        ledger=runtime.recorders.ledger,
        models=runtime.models,
        outlet=outlet,
        delivery=OutboxDelivery(runtime.delivery.outbox, runtime.delivery.dispatcher, utc_now),
        config=config or AgentConfig(),
        nicknames=tuple(loaded.nickname),
        book=runtime.tools.book,
        skills=runtime.tools.skills,
        superusers=frozenset(loaded.superusers),
        sources=runtime.extensions.plugged.context_sources,
        # A test's own config stands for the agent file; without one, the console's section.
        limits=(lambda: config) if config else runtime.settings_registry.section("agent").current,
    )
    if before_start is not None:  # what a plugin package would add at load time
        before_start(runtime)
    await runtime.start()
    return runtime


class _Placeholder:
    async def handle(self, turn: object) -> object:
        raise AssertionError("replaced before start")


async def settle(runtime: Runtime) -> None:
    """Let turns finish, the outbox drain and the ledger commit what it queued."""
    await asyncio.sleep(0.05)
    await until(lambda: not runtime.conversation.turn_buffers.running)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    while await runtime.delivery.outbox.open_count():
        if loop.time() >= deadline:
            heads = await runtime.delivery.outbox.heads()
            raise AssertionError(f"outbox did not drain: {heads}")
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)
    await runtime.recorders.ledger.flush()


async def say(runtime: Runtime, msg: InboundMessage) -> int:
    result = await runtime.conversation.ingress.accept(msg)
    assert result.stored is not None
    return result.stored.message_id


async def ledger(engine: AsyncEngine, *kinds: str) -> list[Event]:
    query = select(Event).order_by(Event.id)
    if kinds:
        query = query.where(Event.kind.in_(kinds))
    async with engine.connect() as conn:
        return list((await conn.execute(query)).all())
