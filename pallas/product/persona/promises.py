"""Promises: what the bot says it will do, kept only when an owner asked (docs/persona.md).

an owner's turn, the reply carries [承诺:明天08:00 提醒开会] -> a promise row (open)
-> timed: job `persona.promise_due` at that time -> a turn of the bot's own in that chat
   with the promise as its occasion -> kept
-> untimed: shown in that chat's prompts for `keep_days`, then expired
anyone else's turn with a promise marker -> nothing kept, `promise_refused` (not_owner):
other people's words never change the bot's plans.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from pallas.core.local_time import SHANGHAI
from pallas.product.conversation.jobs.periodic import PeriodicJob
from pallas.product.conversation.jobs.registry import Jobs
from pallas.product.conversation.turns.proactive import ProactiveOutcome, ProactiveTurns
from pallas.product.conversation.turns.turn import Occasion, Turn
from pallas.product.llm.agent.output import IntentKind
from pallas.product.llm.agent.reply_forms import FormContext
from pallas.product.persona.config import PromiseConfig
from pallas.product.persona.promise_store import NewPromise, PromiseState, PromiseStore
from pallas.store.audit import EventKind
from pallas.store.jobs import ClaimedJob
from pallas.store.ledger import LedgerEvent, LedgerWriter

DUE_KIND = "persona.promise_due"
EXPIRE_KIND = "persona.promise_expire"
EXPIRE = PeriodicJob(name="persona_promise_expire", kind=EXPIRE_KIND, cron="41 4 * * *")
OCCASION = "promise_due"
BUSY_RETRY = timedelta(minutes=1)
BUSY_TRIES = 10
HOW_TO = (
    "主人让你答应做什么事时，在回复里加上 [承诺:要做的事]；约了时间就写 [承诺:明天08:00 要做的事]"
)
DUE_HINT = "你答应过主人到这个时候要做的事：{text}。现在时间到了，照答应的去做（比如提醒一句）。"

_DAYS = {"今天": 0, "明天": 1, "后天": 2}
_TIMED = re.compile(
    r"^\s*(?P<day>今天|明天|后天)?\s*(?:早上|上午|中午|下午|晚上)?\s*"
    r"(?P<hour>\d{1,2})(?:[:：](?P<minute>\d{2})|点(?:(?P<cn_minute>\d{1,2})分?|半)?)\s*"
    r"(?P<text>.*)$"
)
_AFTERNOON = re.compile(r"^\s*(?:今天|明天|后天)?\s*(?:下午|晚上)")
_RELATIVE = re.compile(r"^\s*(?P<n>\d{1,4})\s*(?P<unit>秒钟?|分钟|小时)后\s*(?P<text>.*)$")
_UNIT_S = {"秒": 1, "秒钟": 1, "分钟": 60, "小时": 3600}


@dataclass(frozen=True)
class PromiseDraft:
    text: str
    due_at: datetime | None


def read_promise(value: str, now: datetime) -> PromiseDraft | None:
    """A promise marker's value -> what is promised and when (pure; None: nothing said).
    Times are the groups' local time; a bare time already past today means tomorrow."""
    relative = _RELATIVE.match(value)
    if relative is not None and relative.group("text").strip():
        seconds = int(relative.group("n")) * _UNIT_S[relative.group("unit")]
        due = now + timedelta(seconds=seconds)
        return PromiseDraft(relative.group("text").strip(), due)
    match = _TIMED.match(value)
    if match is None or not match.group("text").strip():
        text = value.strip()
        return PromiseDraft(text, None) if text else None
    hour = int(match.group("hour"))
    minute = int(match.group("minute") or match.group("cn_minute") or 0)
    if "半" in value[match.start("hour") : match.start("text")]:
        minute = 30
    late = _AFTERNOON.match(value)
    midnight = late is not None and hour == 12 and "晚上" in late.group()  # 晚上12点: 0:00
    if late and hour < 12:
        hour += 12
    if hour > 23 or minute > 59:
        return PromiseDraft(value.strip(), None)
    local = now.astimezone(SHANGHAI)
    days = _DAYS.get(match.group("day") or "", 0)
    if midnight:
        hour, days = 0, days + 1
    due = (local + timedelta(days=days)).replace(hour=hour, minute=minute, second=0, microsecond=0)
    if match.group("day") is None and due <= local:
        due += timedelta(days=1)
    return PromiseDraft(match.group("text").strip(), due.astimezone(now.tzinfo))


def owner_asking(turn: Turn, owners: frozenset[str]) -> int | None:
    """The person id of the owner who wrote the turn's batch, if one did (pure)."""
    for stored in turn.messages:
        if not stored.message.from_bot and stored.message.sender.user_id in owners:
            return stored.sender_person_id
    return None


@dataclass
class PromiseDeps:
    store: PromiseStore
    jobs: Jobs
    ledger: LedgerWriter
    proactive: ProactiveTurns
    owners: frozenset[str]
    config: Callable[[], PromiseConfig]  # asked where it acts: the console changes it
    clock: Callable[[], datetime]


class PromiseListener:
    """Hears a reply's promise markers: an owner's are kept, anyone else's refused."""

    name = "promises"

    def __init__(self, deps: PromiseDeps) -> None:
        self._deps = deps

    async def heard(self, context: FormContext) -> None:
        values = [i.value for i in context.intents if i.kind is IntentKind.PROMISE]
        turn = context.turn
        owner = owner_asking(turn, self._deps.owners)
        for value in values:
            draft = read_promise(value, context.now)
            if draft is None or owner is None or not self._deps.config().enabled:
                why = "no_text" if draft is None else "not_owner" if owner is None else "disabled"
                self._event(turn, EventKind.PROMISE_REFUSED, why, {"value": value})
                continue
            await self._keep(turn, owner, draft, context.now)

    async def _keep(self, turn: Turn, owner: int, draft: PromiseDraft, now: datetime) -> None:
        deps = self._deps
        promise = NewPromise(
            turn.stream.self_id, turn.stream_id, owner, draft.text, draft.due_at, turn.turn_id
        )
        promise_id = await deps.store.add(promise, now)
        due = draft.due_at.isoformat() if draft.due_at else None
        payload = {"promise_id": promise_id, "text": draft.text, "due_at": due}
        self._event(turn, EventKind.PROMISE_MADE, "timed" if due else "untimed", payload)
        if draft.due_at is not None:
            await _schedule(deps.jobs, promise_id, draft.due_at, 0)

    def _event(self, turn: Turn, kind: EventKind, reason: str, payload: dict[str, object]) -> None:
        self._deps.ledger.record(
            LedgerEvent(kind, turn.stream_id, reason, turn_id=turn.turn_id, payload=payload)
        )


async def _schedule(jobs: Jobs, promise_id: int, due_at: datetime, tries: int) -> None:
    await jobs.enqueue(
        DUE_KIND,
        {"promise_id": promise_id, "tries": tries},
        key=f"{DUE_KIND}:{promise_id}:{tries}",
        due_at=due_at,
        max_attempts=1,  # at most once: a crash mid-turn must not make it speak twice
    )


async def run_promise_due(job: ClaimedJob, deps: PromiseDeps) -> None:
    promise = await deps.store.get(int(job.payload["promise_id"]))
    if promise is None or promise.state is not PromiseState.OPEN:
        return  # an owner took it back meanwhile
    hint = DUE_HINT.format(text=json.dumps(promise.text, ensure_ascii=False))
    result = await deps.proactive.start(promise.stream_id, Occasion(OCCASION, hint, job.key or ""))
    now = deps.clock()
    if result.outcome is ProactiveOutcome.RAN:
        await deps.store.close(promise.id, PromiseState.KEPT, now)
        return
    tries = int(job.payload.get("tries", 0)) + 1
    if result.outcome is ProactiveOutcome.BUSY and tries < BUSY_TRIES:
        await _schedule(deps.jobs, promise.id, now + BUSY_RETRY, tries)
    else:
        await deps.store.close(promise.id, PromiseState.EXPIRED, now)


async def expire_promises(job: ClaimedJob, deps: PromiseDeps) -> None:
    now = deps.clock()
    await deps.store.expire(now - timedelta(days=deps.config().keep_days), now)


class PromiseLines:
    """The persona's state lines about promises: the chat's open ones, and, when an owner
    wrote the batch, how to make one."""

    def __init__(self, deps: PromiseDeps) -> None:
        self._deps = deps

    async def lines(self, turn: Turn) -> list[str]:
        deps, now = self._deps, self._deps.clock()
        config = deps.config()
        if not config.enabled:
            return []
        since = now - timedelta(days=config.keep_days)
        shown = await deps.store.open_in(turn.stream_id, since, config.shown)
        lines = []
        if shown:
            lines.append("你答应过主人：" + "；".join(_described(p.text, p.due_at) for p in shown))
        if owner_asking(turn, deps.owners) is not None:
            lines.append(HOW_TO)
        return lines


def _described(text: str, due_at: datetime | None) -> str:
    if due_at is None:
        return text
    return f"{text}（{due_at.astimezone(SHANGHAI).strftime('%m-%d %H:%M')}）"
