"""How the rest of the bot acts on a chat (send, poke, react) without knowing NoneBot.

Every action finds the connected bot by the stream's bot account id. A missing bot, an
error from NapCat (retcode != 0), a timeout or a lost connection costs one warning line and
returns None / False: acting never raises. The bot's own messages and pokes are recorded
only after NapCat confirmed them (send.py); reactions are not recorded here at all, the
caller writes the audit event.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import nonebot
from loguru import logger
from nonebot.adapters.onebot.v11 import Bot
from nonebot.exception import AdapterException

from pallas.core.actions import (
    HISTORY_UNREADABLE,
    Capability,
    SentLookup,
    is_platform_id,
    reaction_id,
)
from pallas.core.inbound import InboundMessage, Segment, SegmentKind, StreamKey, StreamKind
from pallas.core.text import excerpt, render_plain_text
from pallas.platform.onebot.outbound import UnsendableSegmentError, inline_assets
from pallas.platform.onebot.segments import convert_segments
from pallas.platform.onebot.send import (
    Clock,
    Recorder,
    lookup_nickname,
    own_message,
    poke_and_record,
    send_and_record,
    utc_now,
)

# Substrings of `get_version_info`'s app_name (case-insensitive) -> what that implementation
# does. Anything not listed is unknown, and unknown means unavailable: an action the platform
# cannot do would be chosen by the model and then silently do nothing.
_KNOWN_IMPLEMENTATIONS: tuple[tuple[str, frozenset[Capability]], ...] = (
    ("napcat", frozenset({Capability.POKE, Capability.REACT})),
    ("llonebot", frozenset({Capability.POKE})),
    ("lagrange", frozenset({Capability.POKE})),
)


def capabilities_for(app_name: str) -> frozenset[Capability]:
    """The capabilities of an implementation, by the app name it reports."""
    folded = app_name.casefold()
    for marker, capabilities in _KNOWN_IMPLEMENTATIONS:
        if marker in folded:
            return capabilities
    return frozenset()


HISTORY_COUNT = 20  # newest messages of a chat asked for when a receipt was lost
HISTORY_TIMEOUT_S = 5.0
CLOCK_SLACK_S = 5  # NapCat's clock and ours may differ a little
PROBE_TIMEOUT_S = 5.0  # one get_version_info; NapCat answers in milliseconds when well
PROBE_RETRY_S = 30.0  # after a failed or unanswered probe, ask again this much later
PROBE_WAIT_S = 1.0  # how long a turn waits for a probe in flight before going on without it


@dataclass(frozen=True)
class PlatformInfo:
    """For the health report: `capabilities` None while the probe has no answer yet."""

    implementation: str
    capabilities: frozenset[Capability] | None


@dataclass
class _Probe:
    """What one connection reported; `bot` tells this connection from a later one.

    `capabilities` is None while unknown: nothing that needs a capability is offered then.
    """

    bot: Bot
    capabilities: frozenset[Capability] | None = None
    implementation: str = ""  # app name and version, as get_version_info reported them
    task: asyncio.Task[None] | None = None
    retry_at: float = 0.0  # monotonic seconds; a failed probe is asked again from then on


# The group a temporary private chat came through, or None (see pallas/store/members.py).
TempChatRoute = Callable[[StreamKey], Awaitable[str | None]]


async def no_temp_chats(stream: StreamKey) -> str | None:
    return None


class OneBotOutlet:
    def __init__(
        self,
        recorder: Recorder,
        clock: Clock = utc_now,
        route: TempChatRoute = no_temp_chats,
        *,
        assets: Path | None = None,
        probe_timeout_s: float = PROBE_TIMEOUT_S,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._recorder = recorder
        self._assets = assets  # PALLAS_DATA_DIR/assets: where `asset:` references point
        self._clock = clock
        self._route = route
        self._probe_timeout_s = probe_timeout_s
        # One entry per bot account (bounded); a reconnect makes a new Bot object, so the
        # identity check below asks the new connection again.
        self._probes: dict[str, _Probe] = {}
        self._monotonic = monotonic

    async def send(
        self, stream: StreamKey, segments: Sequence[Segment], quote: str | None = None
    ) -> str | None:
        """Send a message, quoting `quote` if given; the platform message id, or None."""
        bot = _connected_bot(stream.self_id, _where(stream))
        if bot is None:
            return None
        if not segments:
            logger.warning("send to {}: empty message, not sent", _where(stream))
            return None
        if quote is not None and not is_platform_id(quote):
            # A poke's synthetic id, say: the message still goes out, just unquoted.
            logger.warning(
                "send to {}: cannot quote {!r}, sent unquoted", _where(stream), excerpt(quote)
            )
            quote = None
        if quote is not None:
            segments = (Segment(SegmentKind.REPLY, target=quote), *segments)
        try:
            wire = inline_assets(segments, self._assets)
        except UnsendableSegmentError as exc:
            logger.warning("send to {}: {}", _where(stream), exc)
            return None
        try:
            via_group = await self._route(stream)
            return await send_and_record(
                bot, self._recorder, stream, segments, self._clock, via_group, wire
            )
        except TimeoutError as exc:
            logger.warning("send to {} timed out: {!r}", _where(stream), exc)
            return None

    async def poke(self, stream: StreamKey, user_id: str) -> bool:
        """Poke `user_id` in the stream; True once NapCat confirmed it (and it is recorded)."""
        bot = _connected_bot(stream.self_id, _where(stream))
        if bot is None:
            return False
        if not is_platform_id(user_id):
            logger.warning("poke in {}: {!r} is not a user id", _where(stream), excerpt(user_id))
            return False
        try:
            return await poke_and_record(bot, self._recorder, stream, user_id, self._clock)
        except TimeoutError as exc:
            logger.warning("poke of {} in {} timed out: {!r}", user_id, _where(stream), exc)
            return False

    async def react(self, stream: StreamKey, platform_message_id: str, reaction: str) -> bool:
        """Put a reaction from the closed vocabulary on a message; True once NapCat confirmed."""
        emoji_id = reaction_id(reaction)
        if emoji_id is None:
            logger.warning("react in {}: unknown reaction {!r}", _where(stream), excerpt(reaction))
            return False
        if not is_platform_id(platform_message_id):
            logger.warning(
                "react in {}: cannot react to {!r}", _where(stream), excerpt(platform_message_id)
            )
            return False
        bot = _connected_bot(stream.self_id, _where(stream))
        if bot is None:
            return False
        try:
            await bot.call_api(
                "set_msg_emoji_like", message_id=int(platform_message_id), emoji_id=emoji_id
            )
        except (AdapterException, TimeoutError) as exc:
            logger.warning(
                "set_msg_emoji_like {} on {} in {} failed: {!r}",
                reaction,
                platform_message_id,
                _where(stream),
                exc,
            )
            return False
        return True

    async def find_sent(self, stream: StreamKey, text: str, since: datetime) -> SentLookup:
        """Whether the bot's message with this text went out since `since`, per NapCat's
        message history (the witness left when both the receipt and the echo were lost with
        a connection). Found, it is recorded in the timeline like any own message."""
        bot = _connected_bot(stream.self_id, _where(stream))
        if bot is None:
            return HISTORY_UNREADABLE
        messages = await _recent_history(bot, stream)
        if messages is None:
            return HISTORY_UNREADABLE
        for item in messages:
            found = _own_message_with_text(item, stream, text, since)
            if found is not None:
                await self._recorder.accept(found)
                return SentLookup(answered=True, platform_message_id=found.platform_message_id)
        return SentLookup(answered=True)

    async def nickname(self, self_id: str, user_id: str) -> str | None:
        """The user's QQ nickname, or None if the bot is not connected or NapCat cannot say."""
        bot = _connected_bot(self_id, f"nickname of {excerpt(user_id, 20)}")
        if bot is None or not is_platform_id(user_id):
            return None
        return await lookup_nickname(bot, user_id)

    async def is_connected(self, self_id: str) -> bool:
        """Whether that bot account has a live connection (sends would have a chance)."""
        return self_id in nonebot.get_bots()

    async def capabilities(self, self_id: str) -> frozenset[Capability]:
        """What the implementation behind this bot account's connection can do.

        Asked off the turn's path: a turn waits at most PROBE_WAIT_S for an answer, then goes
        on with nothing offered; the probe goes on (PROBE_TIMEOUT_S) and is asked again
        PROBE_RETRY_S after a failure. Unknown is never cached as "none".
        """
        bot = nonebot.get_bots().get(self_id)
        if not isinstance(bot, Bot):
            return frozenset()  # not connected: nothing to offer, and nothing went wrong
        probe = self.probe(self_id, bot)
        if probe.capabilities is None and probe.task is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(probe.task), PROBE_WAIT_S)
        return probe.capabilities or frozenset()

    def platform(self, self_id: str) -> PlatformInfo | None:
        """What is known of the implementation behind this account, without waiting (the
        probe is started if it is due); None while not connected."""
        bot = nonebot.get_bots().get(self_id)
        if not isinstance(bot, Bot):
            return None
        probe = self.probe(self_id, bot)
        return PlatformInfo(probe.implementation, probe.capabilities)

    def probe(self, self_id: str, bot: Bot) -> _Probe:
        """This connection's probe, started (or started again, when due) if still unknown."""
        probe = self._probes.get(self_id)
        if probe is None or probe.bot is not bot:
            probe = self._probes[self_id] = _Probe(bot)
        due = probe.task is None and self._monotonic() >= probe.retry_at
        if probe.capabilities is None and due:
            probe.task = asyncio.create_task(self._run_probe(probe), name=f"probe {self_id}")
        return probe

    async def _run_probe(self, probe: _Probe) -> None:
        try:
            probe.implementation, probe.capabilities = await _ask_capabilities(
                probe.bot, self._probe_timeout_s
            )
        except Exception as exc:  # no answer: unknown for now, asked again later
            logger.warning(
                "bot {}: get_version_info failed ({!r}); platform actions are not offered "
                "until it answers (asked again in {:.0f} s)",
                probe.bot.self_id,
                exc,
                PROBE_RETRY_S,
            )
            probe.retry_at = self._monotonic() + PROBE_RETRY_S
        finally:
            probe.task = None


async def _ask_capabilities(bot: Bot, timeout_s: float) -> tuple[str, frozenset[Capability]]:
    """What the implementation calls itself ("NapCat.Onebot 4.8.95") and what it can do."""
    info: Any = await asyncio.wait_for(bot.call_api("get_version_info"), timeout_s)
    info = info if isinstance(info, dict) else {}
    app_name = str(info.get("app_name") or "")
    capabilities = capabilities_for(app_name)
    name = excerpt(app_name, 60) or "an unnamed implementation"
    version = excerpt(str(info.get("app_version") or "?"), 30)
    logger.info(
        "bot {} runs {} (version {}): capabilities {}",
        bot.self_id,
        name,
        version,
        ", ".join(sorted(capabilities)) or "none",
    )
    return f"{name} {version}", capabilities


async def _recent_history(bot: Bot, stream: StreamKey) -> list[Any] | None:
    """The chat's newest messages from NapCat, or None when it cannot say."""
    if stream.kind is StreamKind.GROUP:
        action, target = "get_group_msg_history", {"group_id": stream.external_id}
    else:
        action, target = "get_friend_msg_history", {"user_id": stream.external_id}
    try:
        data: Any = await asyncio.wait_for(
            bot.call_api(action, **target, count=HISTORY_COUNT), HISTORY_TIMEOUT_S
        )
    except (AdapterException, TimeoutError) as exc:
        logger.warning("{} for {} failed: {!r}", action, _where(stream), exc)
        return None
    messages = data.get("messages") if isinstance(data, dict) else None
    return messages if isinstance(messages, list) else None


def _own_message_with_text(
    item: Any, stream: StreamKey, text: str, since: datetime
) -> InboundMessage | None:
    if not isinstance(item, dict) or str(item.get("user_id")) != stream.self_id:
        return None
    seconds = item.get("time")
    if not isinstance(seconds, int) or seconds < since.timestamp() - CLOCK_SLACK_S:
        return None
    raw = item.get("message")
    pairs = [
        (str(seg.get("type")), seg.get("data") or {})
        for seg in (raw if isinstance(raw, list) else [])
        if isinstance(seg, dict)
    ]
    segments = convert_segments(pairs).segments
    if render_plain_text(segments) != text or item.get("message_id") is None:
        return None
    when = datetime.fromtimestamp(seconds, UTC)
    return own_message(stream, segments, str(item["message_id"]), when)


def _connected_bot(self_id: str, where: str) -> Bot | None:
    bot = nonebot.get_bots().get(self_id)
    if isinstance(bot, Bot):
        return bot
    logger.warning("{}: bot {} is not connected, nothing done", where, self_id)
    return None


def _where(stream: StreamKey) -> str:
    return excerpt(f"{stream.kind}:{stream.external_id}", 60)
