"""The daily spending cap (docs/cost.md): every model call reserves its worst case before it
starts and settles to what it really cost after, so spending stops at the cap with at most
one call's overshoot, however many calls run at once.

  call -> reserve(worst case: the prompt's estimate plus its max_tokens, at its prices)
       -> refused when today's spent + reserved has reached a cap: BudgetReachedError
       -> the call -> settle(its real cost and tokens) / release (it failed)

A day is the bot's (China's) calendar day; a reservation made before midnight settles into
its own day. What was spent today before a restart is read back from the store (`seed`).
Both caps may be set: a currency one (the providers file's prices) and a token one (for
owners without prices).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import date, datetime, time

from loguru import logger

from pallas.core.local_time import SHANGHAI
from pallas.providers.errors import ProviderError

DEFAULT_OUTPUT_TOKENS = 1024  # a request without max_tokens may write this much, we assume


@dataclass(frozen=True)
class Spend:
    cost: float = 0.0
    tokens: int = 0

    def __add__(self, other: Spend) -> Spend:
        return Spend(self.cost + other.cost, self.tokens + other.tokens)


@dataclass(frozen=True)
class BudgetLimits:
    cost: float | None = None  # PALLAS_DAILY_BUDGET, in the prices' currency
    tokens: int | None = None  # PALLAS_DAILY_TOKEN_BUDGET

    @property
    def active(self) -> bool:
        return self.cost is not None or self.tokens is not None


@dataclass(frozen=True)
class Shares:
    """How the day's caps are shared out (the console's 预算 section, docs/cost.md)."""

    # Work nobody waits for (extraction, summaries) stops at this share of a cap, so what is
    # left of the day goes to answering people.
    ambient: float = 0.8
    cheaper_from: float = 0.9  # from this share on, `cheaper_model` answers first
    cheaper_model: str = ""
    # Purposes that share one most, as a share of the caps (a turn's decision, reply and tool
    # calls together, say): (the purposes, the share).
    purposes: tuple[tuple[tuple[str, ...], float], ...] = ()

    def limits_of(self, purpose: str) -> list[tuple[tuple[str, ...], float]]:
        return [(group, share) for group, share in self.purposes if purpose in group]


class BudgetReachedError(ProviderError):
    """Today's cap is reached: no model is called until tomorrow (or a raised cap)."""

    def __init__(self, day: date, spent: Spend, limits: BudgetLimits) -> None:
        super().__init__(f"daily budget reached on {day}: {describe(spent, limits)}")
        self.day = day


def day_of(moment: datetime) -> date:
    return moment.astimezone(SHANGHAI).date()


def start_of(day: date) -> datetime:
    return datetime.combine(day, time(), SHANGHAI)


def reached(limits: BudgetLimits, committed: Spend, share: float = 1.0) -> bool:
    """Whether what is spent and reserved has reached `share` of a cap (pure). A call starts
    only below every cap, so the last one may overshoot by at most its own cost."""
    over_cost = limits.cost is not None and committed.cost >= limits.cost * share
    over_tokens = limits.tokens is not None and committed.tokens >= limits.tokens * share
    return over_cost or over_tokens


def describe(spent: Spend, limits: BudgetLimits) -> str:
    parts = []
    if limits.cost is not None:
        parts.append(f"cost {spent.cost:.4f} of {limits.cost:g}")
    if limits.tokens is not None:
        parts.append(f"tokens {spent.tokens} of {limits.tokens}")
    return ", ".join(parts) or "no cap"


Seed = Callable[[datetime], Awaitable[Spend]]  # what the store says was spent since then
# The same by part: "purpose:<purpose>" and "stream:<id>" keys.
SeedParts = Callable[[datetime], Awaitable[dict[str, Spend]]]
GroupShare = Callable[[int], Awaitable[float]]  # a chat's most, as a share of the caps
Reached = Callable[[date, int | None], Awaitable[None]]  # the day, the chat that hit it
# An owner's caps for one day, kept in the store so a restart keeps them (None: the defaults).
LoadRaised = Callable[[date], Awaitable[BudgetLimits | None]]
SaveRaised = Callable[[date, BudgetLimits], Awaitable[None]]


async def _nothing_spent(_since: datetime) -> Spend:
    return Spend()


async def _no_parts(_since: datetime) -> dict[str, Spend]:
    return {}


async def _whole(_stream_id: int) -> float:
    return 1.0


def parts_of(purpose: str, stream_id: int | None) -> tuple[str, ...]:
    """The parts a call's spend counts toward besides the whole day's."""
    keys = (f"purpose:{purpose}",) if purpose else ()
    return keys + ((f"stream:{stream_id}",) if stream_id is not None else ())


@dataclass
class DailyBudget:
    limits: BudgetLimits
    clock: Callable[[], datetime]
    seed: Seed = _nothing_spent
    # Told the first time a call is refused on a day (the owners' notice); set after start.
    on_reached: Reached | None = None
    load_raised: LoadRaised | None = None
    save_raised: SaveRaised | None = None
    shares: Callable[[], Shares] = Shares  # the console's section, read at every call
    group_share: GroupShare = _whole
    seed_parts: SeedParts = _no_parts
    _today_limits: BudgetLimits | None = None  # today's caps when an owner changed them
    _day: date | None = None
    _spent: Spend = field(default_factory=Spend)
    _parts: dict[str, Spend] = field(default_factory=dict)  # today's, by purpose and by chat
    _reserved: dict[int, tuple[date, Spend, tuple[str, ...]]] = field(default_factory=dict)
    _told: set[date] = field(default_factory=set)
    _ids: itertools.count[int] = field(default_factory=itertools.count)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _notices: set[asyncio.Task[None]] = field(default_factory=set)

    async def reserve(
        self,
        worst: Spend,
        stream_id: int | None = None,
        *,
        purpose: str = "",
        ambient: bool = False,
    ) -> int:
        """Hold `worst` for a call about to start; raises BudgetReachedError at a cap: the
        whole day's, its purpose's or its chat's share of it, or for ambient work its share
        (nobody is told of the shares)."""
        keys = parts_of(purpose, stream_id)
        async with self._lock:
            day = await self._today()
            shares, limits = self.shares(), self.today_limits
            whole = self._spent + self._held(day)
            checks = [(whole, shares.ambient if ambient else 1.0)]
            for group, share in shares.limits_of(purpose):
                checks.append((self._committed(day, *(f"purpose:{p}" for p in group)), share))
            if stream_id is not None:
                share = await self.group_share(stream_id)
                checks.append((self._committed(day, f"stream:{stream_id}"), share))
            if not any(reached(limits, committed, share) for committed, share in checks):
                rid = next(self._ids)
                self._reserved[rid] = (day, worst, keys)
                return rid
            refused = BudgetReachedError(day, self._spent, limits)
            full = reached(limits, whole)
        if full:
            await self._tell(day, stream_id)
        raise refused

    def settle(self, rid: int, spent: Spend) -> None:
        day, _worst, keys = self._reserved.pop(rid, (None, Spend(), ()))
        if day is not None and day == self._day:  # an earlier day's call is in the store
            self._spent = self._spent + spent
            for key in keys:
                self._parts[key] = self._parts.get(key, Spend()) + spent

    def release(self, rid: int) -> None:
        self._reserved.pop(rid, None)

    def cheaper_model(self) -> str | None:
        """The model to answer first now: the cheaper one, once the day's spending passed
        its share; None: the usual order."""
        shares = self.shares()
        if not shares.cheaper_model or self._day != day_of(self.clock()):
            return None  # nothing yet today: yesterday's spending decides nothing
        committed = self._spent + self._held(self._day)
        passed = reached(self.today_limits, committed, shares.cheaper_from)
        return shares.cheaper_model if passed else None

    def spent_out(self) -> bool:
        """Today's cap is reached: no model will be called (the deterministic answers may
        stand in for it)."""
        if self._day != day_of(self.clock()):
            return False
        return reached(self.today_limits, self._spent + self._held(self._day))

    def _held(self, day: date, *wanted: str) -> Spend:
        """Held today, by every call or (with `wanted`) by calls counting toward any of them."""
        held = Spend()
        for held_day, worst, keys in self._reserved.values():
            if held_day == day and (not wanted or any(key in keys for key in wanted)):
                held = held + worst
        return held

    def _committed(self, day: date, *keys: str) -> Spend:
        spent = sum((self._parts.get(key, Spend()) for key in keys), Spend())
        return spent + self._held(day, *keys)

    async def today(self) -> tuple[date, Spend]:
        async with self._lock:
            return await self._today(), self._spent

    @property
    def today_limits(self) -> BudgetLimits:
        """The caps in force today: an owner's for today, else the configured ones."""
        return self._today_limits or self.limits

    async def set_today(self, limits: BudgetLimits) -> date:
        """An owner's caps for the rest of today (kept in the store); tomorrow the configured
        ones hold again."""
        async with self._lock:
            day = await self._today()
            self._today_limits = limits
        if self.save_raised is not None:
            await self.save_raised(day, limits)
        logger.info("budget: today's caps set by an owner: {}", describe(self._spent, limits))
        return day

    async def _today(self) -> date:
        day = day_of(self.clock())
        if day != self._day:
            try:
                spent = await self.seed(start_of(day))
                parts = await self.seed_parts(start_of(day))
            except Exception as exc:  # a store hiccup: count from nothing rather than fail
                logger.opt(exception=exc).error("budget: today's spend not read: {!r}", exc)
                spent, parts = Spend(), {}
            self._day, self._spent, self._parts = day, spent, dict(parts)
            self._today_limits = await self._raised(day)
        return day

    async def _raised(self, day: date) -> BudgetLimits | None:
        if self.load_raised is None:
            return None
        try:
            return await self.load_raised(day)
        except Exception as exc:  # the configured caps hold
            logger.opt(exception=exc).error("budget: today's raised caps not read: {!r}", exc)
            return None

    async def _tell(self, day: date, stream_id: int | None) -> None:
        if day in self._told:
            return
        self._told.add(day)
        logger.warning(
            "budget: today's cap is reached ({})", describe(self._spent, self.today_limits)
        )
        if self.on_reached is not None:
            # Its own task: the refused caller's timeout or cancellation must not cut it.
            task = asyncio.create_task(self._notify(day, stream_id), name="budget notice")
            self._notices.add(task)
            task.add_done_callback(self._notices.discard)

    async def _notify(self, day: date, stream_id: int | None) -> None:
        assert self.on_reached is not None
        try:
            await self.on_reached(day, stream_id)
        except Exception as exc:  # the cap holds whether or not the owners were told
            logger.opt(exception=exc).error("budget: the owners could not be told: {!r}", exc)


__all__ = [
    "DEFAULT_OUTPUT_TOKENS",
    "BudgetLimits",
    "BudgetReachedError",
    "DailyBudget",
    "Shares",
    "Spend",
    "day_of",
    "describe",
    "reached",
    "start_of",
]
