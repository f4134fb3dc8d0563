"""The outbox dispatcher: sends what the outbox holds, in order, paced, and only once.

One background task. Each conversation's rows go strictly in order (only its oldest open row
is ever considered); a row is marked `sending` before the platform is called and `sent` only
on its receipt. While a bot account is not connected its rows wait. Failures retry with
backoff, then become `delivery_failed`. At start-up, rows interrupted mid-send are resolved
by `recover_interrupted` before anything new goes out.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, Protocol

from loguru import logger

from pallas.core.actions import (
    HISTORY_UNREADABLE,
    ChatAction,
    Origin,
    OutboxKind,
    Poke,
    SentLookup,
    action_of,
)
from pallas.core.inbound import Segment, SegmentKind, StreamKind
from pallas.product.conversation.delivery.account_pace import HOUR_MINUTES, outgoing_of
from pallas.product.conversation.delivery.contract import (
    DeliveryReport,
    OutgoingMessage,
    OutgoingReply,
    Outlet,
)
from pallas.product.conversation.delivery.in_flight import InFlight
from pallas.product.conversation.delivery.pacing import (
    DeliveryPolicy,
    PolicyReader,
    RateGate,
    Recovery,
    bubble_pauses,
    is_stale,
    reader_of,
    recover_interrupted,
    retry_delay,
)
from pallas.product.conversation.delivery.payload import (
    AssetExists,
    check_action,
    message_payload,
    no_assets,
    payload_text,
    segments_of,
)
from pallas.product.conversation.delivery.safety import (
    NOBODY,
    Numbers,
    OutgoingScreen,
    Screened,
    bare_numbers,
)
from pallas.product.conversation.processes.lease import LeaseNotCurrent
from pallas.store.audit import EventKind
from pallas.store.ledger import LedgerEvent, LedgerWriter
from pallas.store.outbox import DroppedRow, NewItem, OutboxRow, OutboxStatus, OutboxStore

# A message row's payload, its origin, and whose numbers it may hold.
Screen = Callable[[dict[str, Any], str | None, Numbers], Screened]
# A feature's own check of what leaves (the seam's `add_outgoing_check`), after the screen.
OutgoingCheck = Callable[[dict[str, Any], str | None], Screened]
BUILT_IN_SCREEN = OutgoingScreen()  # the lexicon and the number rules, no owner's words
IDLE_WAKE_S = 1.0  # a row waiting for a connection or a settlement: look again this often
# Nothing open: the loop sleeps until a queued row wakes it; this slow look is a safety net.
IDLE_LOOK_S = 30.0
HEADS_PER_LOOK = 200  # the chats one look considers, oldest first


# Told of each row once the platform confirmed it (docs/delivery.md).
ReceiptListener = Callable[[OutboxRow], Awaitable[None]]
# Which account a row goes through (the several-accounts routing; docs/accounts.md).
Route = Callable[[OutboxRow], Awaitable[OutboxRow]]


async def as_queued(row: OutboxRow) -> OutboxRow:
    """One account: the row goes through the account it names."""
    return row


class Alone:
    """The dispatcher's process is the store's only one: every row is its own to settle."""

    def valid(self) -> bool:
        return True

    async def confirm(self) -> bool:
        return True

    def settles(self, holder: str | None) -> bool:
        return True


class SendLease(Protocol):
    """The process's lease as sending sees it (docs/scaling.md)."""

    def valid(self) -> bool:
        """Whether this process may act now: its lease was renewed recently enough."""
        ...

    async def confirm(self) -> bool:
        """Like `valid`, a renewal deciding when the last one is too old."""
        ...

    def settles(self, holder: str | None) -> bool:
        """Whether a row left `sending` by `holder` is this process's to settle: its own, or
        a dead process's that was recovered."""
        ...


class OutboxDispatcher:
    def __init__(
        self,
        store: OutboxStore,
        outlet: Outlet,
        ledger: LedgerWriter,
        policy: DeliveryPolicy | PolicyReader,
        clock: Callable[[], datetime],
        monotonic: Callable[[], float] = time.monotonic,
        screen: Screen = BUILT_IN_SCREEN,
        route: Route = as_queued,
        lease: SendLease | None = None,
    ) -> None:
        self._store = store
        self._lease = lease or Alone()
        self._lease_was_valid = True
        self._route = route  # which account a row goes through (docs/accounts.md)
        self._screen = screen  # what may leave, checked on every message row before it does
        self._outlet = outlet
        self._ledger = ledger
        self._pacing = reader_of(policy)  # asked at every send: the console may change it
        self._clock = clock
        self._monotonic = monotonic
        self._gate = RateGate(self._pacing)
        self._wake = asyncio.Event()
        self._stopping = False
        self._task: asyncio.Task[None] | None = None
        self._receipt_listeners: list[ReceiptListener] = []
        self._checks: list[OutgoingCheck] = []
        self.in_flight = InFlight()  # the ingress asks it which part of the bot an echo is

    @property
    def policy(self) -> DeliveryPolicy:
        """The pacing as it is now: the next send and the next reply queued use it."""
        return self._pacing()

    def on_receipt(self, listener: ReceiptListener) -> None:
        """Call `listener` for each row once it is known sent (a feature counting what it
        sent: a sticker's uses). A crash between the commit and the call loses the count,
        never doubles it."""
        self._receipt_listeners.append(listener)

    def add_check(self, check: OutgoingCheck) -> None:
        """Check every message row after the built-in screen: refuse it (payload None) or
        rewrite it, naming the rule for the audit (docs/delivery.md, "Outgoing safety")."""
        self._checks.append(check)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="outbox dispatcher")

    async def stop(self) -> None:
        """Stop between sends; what is still open stays in the outbox for the next start."""
        self._stopping = True
        self._wake.set()
        if self._task is not None:
            await self._task

    def wake(self) -> None:
        self._wake.set()

    async def recover(self) -> dict[str, int]:
        """Resolve rows a previous process left in `sending` (outcome unknown).

        A row whose echo is in the timeline is confirmed at once; the others wait until their
        bot account is connected and its message history can be asked (see `_consider`).
        """
        await self._seed_pace()
        counts = {r.value: 0 for r in Recovery}
        for row in await self._store.interrupted():
            if not self._lease.settles(row.holder):
                continue  # another live process is sending it
            action = await self._resolve_interrupted(row)
            if action is not None:
                counts[action.value] += 1
        if any(counts.values()):
            logger.warning("outbox: interrupted sends at start-up: {}", counts)
        return counts

    async def _seed_pace(self) -> None:
        """The accounts' last hour of sends, from the store: a restart does not reopen the
        windows risk control still remembers."""
        now, at_now = self._clock(), self._monotonic()
        policy = self.policy
        hour = timedelta(seconds=policy.minute_s * HOUR_MINUTES)
        for row in await self._store.sent_since(now - hour):
            at = at_now - (now - row.updated_at).total_seconds()
            self._gate.accounts.sent(outgoing_of(row, now, policy), at)

    async def _resolve_interrupted(self, row: OutboxRow) -> Recovery | None:
        """Confirm, resend or give up a row left `sending`; None while it must wait for the
        connection (the platform's history is the only witness left)."""
        now = self._clock()
        self.in_flight.hold(row.stream, row.origin)  # the history's copy is stored as ours
        echo = await self._echo_of(row, row.updated_at)  # since the send began
        lookup: SentLookup | None = None  # not asked: an echo, or not a message
        if echo is None and row.kind == OutboxKind.MESSAGE:
            if await self._outlet.is_connected(row.stream.self_id):
                text = payload_text(row.payload)
                lookup = await self._outlet.find_sent(row.stream, text, row.updated_at)
            elif not is_stale(row.created_at, now, self.policy):
                return None
        known = lookup or HISTORY_UNREADABLE
        in_history = known.platform_message_id is not None if known.answered else None
        action = recover_interrupted(
            row.created_at, now, self.policy, echoed=echo is not None, in_history=in_history
        )
        found = echo or known.platform_message_id
        if action is Recovery.CONFIRMED:
            await self._settle(row, OutboxStatus.SENT, now, platform_message_id=found)
            await self._receipted(row)
        elif action is Recovery.RESEND:
            await self._store.mark(row.id, OutboxStatus.PENDING, now)
        else:
            await self._settle(row, OutboxStatus.UNKNOWN, now)
        detail = {"echo": echo, "history": _history_word(lookup)}
        self._event(row, EventKind.DELIVERY_RECOVERED, action.value, detail)
        return action

    async def _echo_of(self, row: OutboxRow, since: datetime) -> str | None:
        """The platform's report of this send, if it arrived though the receipt did not."""
        if row.kind != OutboxKind.MESSAGE:
            return None
        return await self._store.unclaimed_echo(row.stream_id, payload_text(row.payload), since)

    async def _run(self) -> None:
        while not self._stopping:
            self._wake.clear()  # before the tick: a wake-up during it is not lost
            try:
                delay = await self._tick()
            except Exception as exc:  # a store hiccup must not stop delivery for good
                logger.opt(exception=exc).error("outbox dispatcher: {!r}", exc)
                delay = IDLE_WAKE_S
            if delay <= 0:
                await asyncio.sleep(0)  # let other tasks run between sends
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=delay)

    async def _tick(self) -> float:
        """Send every head row that may go now; the seconds until the next one might.

        Heads of different conversations that may all go now are sent together: one
        transaction marks them `sending`, their platform calls run side by side, one
        transaction marks the confirmed ones `sent`. After any progress the next heads are due
        at once (0): a reply's next bubble, say.
        """
        if not await self.may_act():
            return IDLE_WAKE_S  # a process whose lease is not current touches no row
        ready: list[OutboxRow] = []
        # Heads stay heads until the dispatcher itself acts on them (enqueue only adds rows
        # behind them, backpressure never drops a head), so one query serves every batch.
        heads = await self._store.heads(HEADS_PER_LOOK)
        # No head at all: an enqueue wakes the loop. A full page: chats past it wait their turn.
        soonest = IDLE_WAKE_S if len(heads) >= HEADS_PER_LOOK else IDLE_LOOK_S
        for row in heads:
            if self._stopping:
                return IDLE_WAKE_S  # nothing more starts; what is open waits for the next run
            soonest = min(soonest, await self._consider(row, ready))
            if len(ready) >= self.policy.parallel_sends:
                await self._send(ready)
                ready = []
        if ready and not self._stopping:
            await self._send(ready)
        return max(0.0, soonest)

    async def _consider(self, row: OutboxRow, ready: list[OutboxRow]) -> float:
        """Settle or wait for the row; if it may go now, reserve its pacing and add it to
        `ready`. The seconds until this conversation needs another look."""
        if row.status == OutboxStatus.SENDING.value:
            if not self._lease.settles(row.holder):
                return IDLE_WAKE_S  # another live process is sending it
            # Left mid-send by a crash or a failed status write: resolved, never resent blindly.
            resolved = await self._resolve_interrupted(row)
            return 0.0 if resolved is not None else IDLE_WAKE_S
        now = self._clock()
        if is_stale(row.created_at, now, self.policy):
            await self._settle(row, OutboxStatus.EXPIRED, now)
            self._event(row, EventKind.DELIVERY_EXPIRED, row.kind, {"age_s": _age(row, now)})
            return 0.0
        not_yet = (row.not_before - now).total_seconds()
        if not_yet > 0:
            return not_yet
        row = await self._routed(row, now)
        if not await self._outlet.is_connected(row.stream.self_id):
            return IDLE_WAKE_S  # waits for the connection; no attempt is spent
        # Only when it could go now: no store read every second while the account is away.
        if row.attempts and await self._echoed_since_failure(row, now):
            return 0.0
        pause = float(row.payload.get("pause_s", 0.0))
        send = outgoing_of(row, now, self.policy)
        wait = self._gate.wait(row.stream_id, pause, self._monotonic(), send)
        if wait > 0:
            return wait
        # Screened once, when it is about to go: not at every look while it waits its turn.
        row = await self._screened(row, now)
        if row is None:
            return 0.0
        self._gate.sent(row.stream_id, self._monotonic(), send)  # reserved: the next head waits
        ready.append(row)
        return 0.0

    async def _routed(self, row: OutboxRow, now: datetime) -> OutboxRow:
        """The row as it goes: through the account the routing picks, kept on the row so
        that a crash mid-send asks that account's history (see _resolve_interrupted)."""
        routed = await self._route(row)
        account = routed.stream.self_id
        if account != row.account:
            await self._store.set_account(row.id, account)
            if row.account is not None:
                detail = {"from": row.account, "to": account}
                self._event(row, EventKind.DELIVERY_HANDED_OVER, "handover", detail)
        return replace(routed, account=account)

    async def _screened(self, row: OutboxRow, now: datetime) -> OutboxRow | None:
        """The row as it may leave: refused (settled, audited), masked (kept so, audited), or
        as it is."""
        if row.kind != OutboxKind.MESSAGE:
            return row
        screened = await self._screen_all(row)
        if screened.payload is None:
            rule = ",".join(screened.rules)
            await self._settle(row, OutboxStatus.FAILED, now, last_error=f"refused: {rule}")
            self._event(row, EventKind.OUTGOING_BLOCKED, rule, {"rules": list(screened.rules)})
            logger.warning("outbox: row {} refused by the outgoing screen ({})", row.id, rule)
            return None
        if not screened.changed:
            return row
        await self._store.mark(row.id, OutboxStatus.PENDING, now, payload=screened.payload)
        rules = sorted(set(screened.rules))
        self._event(row, EventKind.OUTGOING_REWRITTEN, ",".join(rules), {"rules": rules})
        return replace(row, payload=screened.payload)

    async def _screen_all(self, row: OutboxRow) -> Screened:
        """The built-in screen, then the features' checks, each on what the last left. A
        check that raises or answers nonsense refuses the row: nothing leaves unchecked."""
        screened = self._screen(row.payload, row.origin, await self._numbers_in(row))
        for check in self._checks:
            if screened.payload is None:
                break
            try:
                more = check(screened.payload, row.origin)
                if not isinstance(more, Screened):
                    raise TypeError(f"an outgoing check answered {type(more).__name__}")
                rules = screened.rules + tuple(more.rules)
                if more.payload is not None and more.payload != screened.payload and not rules:
                    rules = ("rewritten",)  # a rewrite the check did not name
                screened = Screened(more.payload, rules)
            except Exception as exc:
                logger.opt(exception=exc).error("outbox: an outgoing check failed: {!r}", exc)
                return Screened(None, (*screened.rules, "check_failed"))
        return screened

    async def _numbers_in(self, row: OutboxRow) -> Numbers:
        """Whose QQ numbers the row holds, if any could be one: the store is asked only then."""
        found = bare_numbers(payload_text(row.payload))
        if not found:
            return NOBODY
        platform = row.stream.platform
        own = await self._store.asker_ids(platform, row.turn_id) | {row.stream.self_id}
        if row.stream.kind == StreamKind.PRIVATE:
            own |= {row.stream.external_id}  # a private chat's other side is the asker
        return Numbers(await self._store.known_user_ids(platform, found), frozenset(own))

    async def _send(self, rows: list[OutboxRow]) -> None:
        """Hand rows of different conversations to the platform together; `sending` is
        committed for all of them before the first call."""
        if not await self.may_act():
            return
        began = self._clock()
        taken = set(await self._store.mark_sending([row.id for row in rows], began))
        rows = [row for row in rows if row.id in taken]  # the others: another process's now
        for row in rows:  # until settled: a late echo, or one before a retry, is still ours
            self.in_flight.hold(row.stream, row.origin)
        outcomes = await asyncio.gather(*(self._attempt(row) for row in rows))
        if not self._lease.valid():
            # Paused mid-send: the rows stay `sending` under this process's name, settled by
            # the crash rules (by this process once its lease is confirmed, or by the one
            # that took it over), never marked from what this process remembers.
            return
        now = self._clock()
        confirmed = [(row, pid) for row, pid in zip(rows, outcomes, strict=True) if pid is not None]
        if confirmed:
            await self._store.mark_sent([(r.id, pid) for r, pid in confirmed], now)
        for row, platform_id in confirmed:
            self.in_flight.release(row.stream)
            await self._receipted(row)
            self._gate.confirmed(row.stream_id, self._monotonic())
            payload = {"outbox_id": row.id, "platform_message_id": platform_id}
            self._event(row, EventKind.DELIVERED, row.kind, payload)
        unconfirmed = [row for row, pid in zip(rows, outcomes, strict=True) if pid is None]
        for row in unconfirmed:
            await self._failed(row, began, now)

    async def may_act(self) -> bool:
        """Whether this process may queue or send now; said once when that changes."""
        valid = await self._lease.confirm()
        if valid != self._lease_was_valid:
            self._lease_was_valid = valid
            if not valid:
                logger.warning("outbox: this process's lease is not current; nothing is sent")
        return valid

    async def _attempt(self, row: OutboxRow) -> str | None:
        """One platform call under the send timeout: its id, or None (no receipt)."""
        if not self._lease.valid():  # paused since the row was taken: see `_send`
            return None
        try:
            async with asyncio.timeout(self.policy.send_timeout_s):
                return await self._perform(row)
        except TimeoutError:
            logger.warning(
                "outbox: row {} got no receipt in {} s", row.id, self.policy.send_timeout_s
            )
        except Exception as exc:  # the outlet should not raise; if it does, it is a failure
            logger.opt(exception=exc).error("outbox: sending row {} raised {!r}", row.id, exc)
        return None

    async def _echoed_since_failure(self, row: OutboxRow, now: datetime) -> bool:
        """A retry whose earlier attempt the platform reported during the backoff (its echo
        came after the timeout): confirmed, not sent twice."""
        # Since the failed attempt began: it began at most one send timeout before its mark.
        since = row.updated_at - timedelta(seconds=self.policy.send_timeout_s)
        echo = await self._echo_of(row, since)
        if echo is None:
            return False
        await self._settle(row, OutboxStatus.SENT, now, platform_message_id=echo)
        await self._receipted(row)
        self._event(row, EventKind.DELIVERED, row.kind, {"platform_message_id": echo, "echo": True})
        return True

    async def _failed(self, row: OutboxRow, began: datetime, now: datetime) -> None:
        # A lost receipt is not a lost message: if the platform reported it, it was sent.
        echo = await self._echo_of(row, began)
        if echo is not None:
            await self._settle(row, OutboxStatus.SENT, now, taken=True, platform_message_id=echo)
            await self._receipted(row)
            self._event(
                row, EventKind.DELIVERED, row.kind, {"platform_message_id": echo, "echo": True}
            )
            return
        attempts = row.attempts + 1
        error = "the platform did not confirm it"
        if attempts >= self.policy.max_attempts:
            await self._settle(
                row, OutboxStatus.FAILED, now, taken=True, attempts=attempts, last_error=error
            )
            self._event(row, EventKind.DELIVERY_FAILED, row.kind, {"attempts": attempts})
            return
        retry_at = now + timedelta(seconds=retry_delay(attempts, self.policy))
        await self._store.mark(
            row.id,
            OutboxStatus.PENDING,
            now,
            taken=True,
            attempts=attempts,
            not_before=retry_at,
            last_error=error,
        )
        self._event(row, EventKind.DELIVERY_RETRY, row.kind, {"attempts": attempts})

    async def _settle(
        self, row: OutboxRow, status: OutboxStatus, now: datetime, *, taken: bool = False,
        **values: Any,
    ) -> None:
        """A final state for the row: its chat has nothing in flight any more. `taken`: the
        outcome of this process's own send (see OutboxStore.mark)."""
        await self._store.mark(row.id, status, now, taken=taken, **values)
        self.in_flight.release(row.stream)

    async def _receipted(self, row: OutboxRow) -> None:
        for listener in self._receipt_listeners:
            try:
                await listener(row)
            except Exception as exc:  # a count gone wrong must not stop the outbox
                logger.opt(exception=exc).error("outbox: receipt of row {} not counted", row.id)

    async def _perform(self, row: OutboxRow) -> str | None:
        """The platform's id for what was done, or None if it did not confirm."""
        payload = row.payload
        if row.kind == OutboxKind.MESSAGE:
            quote = payload.get("quote")
            return await self._outlet.send(row.stream, segments_of(payload), quote=quote)
        action = action_of(row.kind, payload)
        if isinstance(action, Poke):
            poked = await self._outlet.poke(row.stream, action.user_id)
            return "poke" if poked else None
        reacted = await self._outlet.react(row.stream, action.message_id, action.emoji)
        return "react" if reacted else None

    def dropped(self, row: DroppedRow, stream_id: int, *, superseded: bool) -> None:
        """An unsolicited reply's row given up for backpressure (see OutboxStore.enqueue)."""
        self._ledger.record(
            LedgerEvent(
                kind=EventKind.DELIVERY_DROPPED,
                stream_id=stream_id,
                reason="superseded" if superseded else "queue_full",
                turn_id=row.turn_id,
                payload={"outbox_id": row.id, "reply_id": row.reply_id},
            )
        )

    def _event(self, row: OutboxRow, kind: EventKind, reason: str, payload: dict[str, Any]) -> None:
        self._ledger.record(
            LedgerEvent(
                kind=kind,
                stream_id=row.stream_id,
                reason=reason,
                turn_id=row.turn_id,
                payload={"outbox_id": row.id, **payload},
            )
        )


def _history_word(lookup: SentLookup | None) -> str:
    if lookup is None:
        return "not_asked"
    if not lookup.answered:
        return "unreadable"
    return "found" if lookup.platform_message_id is not None else "absent"


def _age(row: OutboxRow, now: datetime) -> float:
    return round((now - row.created_at).total_seconds(), 1)


class OutboxDelivery:
    """The way out: commit rows (a reply's bubbles, a message, a poke, a reaction), then wake
    the dispatcher. Payloads are checked here; a bad one is refused before anything is written.

    A reply goes out through the account its turn answered as; a responder's message or
    action through the account it names, else the one that answered the chat's latest
    message (`account_for`).
    """

    def __init__(
        self,
        store: OutboxStore,
        dispatcher: OutboxDispatcher,
        clock: Callable[[], datetime],
        asset_exists: AssetExists = no_assets,
        account_for: Callable[[int], str | None] = lambda _stream_id: None,
    ) -> None:
        self._account_for = account_for
        self._store = store
        self._dispatcher = dispatcher
        self._clock = clock
        self._asset_exists = asset_exists

    async def _fence(self) -> None:
        if not await self._dispatcher.may_act():
            raise LeaseNotCurrent("this process's lease is not current: nothing is queued")

    async def deliver(self, reply: OutgoingReply) -> DeliveryReport:
        """The reply's bubbles, then its media, one row each; the quote on the first."""
        await self._fence()
        policy = self._dispatcher.policy
        pauses = bubble_pauses(reply.texts, policy)
        bubble_pauses_ = pauses[: len(reply.bubbles)]
        payloads = [
            self._bubble(text, pause)
            for text, pause in zip(reply.bubbles, bubble_pauses_, strict=True)
        ]
        for media, pause in zip(reply.media, pauses[len(reply.bubbles) :], strict=True):
            payload = message_payload((media.segment,), self._asset_exists, pause_s=pause)
            payloads.append(payload | ({"marks": dict(media.marks)} if media.marks else {}))
        if payloads and reply.quote is not None:
            payloads[0]["quote"] = reply.quote
        queued = await self._store.enqueue(
            reply.turn_id,
            reply.stream_id,
            [NewItem(OutboxKind.MESSAGE, payload) for payload in payloads],
            self._clock(),
            bubbles=reply.texts,
            quote=reply.quote,
            direct=reply.direct,
            max_waiting=policy.max_waiting_unsolicited,
            origin=reply.origin,
            account=reply.stream.self_id,
        )
        for row in queued.dropped:
            self._dispatcher.dropped(row, reply.stream_id, superseded=reply.direct)
        self._dispatcher.wake()
        return DeliveryReport(queued=tuple(queued.ids), failed=False)

    async def send(self, message: OutgoingMessage) -> tuple[int, ...]:
        await self._fence()
        payload = message_payload(message.segments, self._asset_exists)
        queued = await self._store.enqueue(
            message.turn_id,
            message.stream_id,
            [NewItem(OutboxKind.MESSAGE, payload)],
            self._clock(),
            direct=message.direct,
            key=message.key,
            origin=message.origin,
            account=message.account or self._account_for(message.stream_id),
        )
        self._dispatcher.wake()
        return tuple(queued.ids)

    async def act(
        self,
        turn_id: int,
        stream_id: int,
        action: ChatAction,
        *,
        origin: Origin,
        key: str | None = None,
        account: str | None = None,
    ) -> tuple[int, ...]:
        """A poke or a reaction: one outbox row, a fact only once the platform confirms."""
        check_action(action)
        await self._fence()
        item = NewItem(action.kind, action.to_payload())
        queued = await self._store.enqueue(
            turn_id, stream_id, [item], self._clock(), key=key, origin=origin,
            account=account or self._account_for(stream_id),
        )
        self._dispatcher.wake()
        return tuple(queued.ids)

    def _bubble(self, text: str, pause: float) -> dict[str, Any]:
        segments = (Segment(SegmentKind.TEXT, text=text),)
        return message_payload(segments, self._asset_exists, pause_s=pause)
