"""Ports the core offers features through the seam, for what one feature needs of another
(docs/architecture.md, "Adding a feature"): a feature asks the port, never the other
feature; the one that provides the service plugs itself in at install."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from loguru import logger

from pallas.core.facts import NewMemory


class FactKeeper(Protocol):
    async def __call__(self, items: Sequence[NewMemory], now: datetime, *, actor: str) -> Any: ...


class Facts:
    """Facts about people handed over by features other than the one keeping them (the
    sticker habit's favourites, kept by memory). With no keeper (memory off) a fact is
    dropped with a log line: the feature handing it over goes on as before."""

    def __init__(self) -> None:
        self._keeper: FactKeeper | None = None

    def kept_by(self, keeper: FactKeeper) -> None:
        if self._keeper is not None:
            raise RuntimeError("facts already have a keeper")
        self._keeper = keeper

    @property
    def kept(self) -> bool:
        return self._keeper is not None

    async def remember(self, items: Sequence[NewMemory], now: datetime, *, actor: str) -> bool:
        """Whether the facts were kept."""
        if self._keeper is None:
            logger.debug("facts: {} not kept (no feature keeps facts)", len(items))
            return False
        await self._keeper(items, now, actor=actor)
        return True


# What a feature adds to a person's page of the console: its keys of the page's data, for
# the person and the bot accounts known (the console's persons/{id}).
PersonFacet = Callable[[int, Sequence[str]], Awaitable[Mapping[str, Any]]]

@dataclass(frozen=True)
class OwnerPage:
    """A page a feature adds to the console's menu: the console serves a signed-in shell with
    the session's CSRF value, and the feature's own script draws it from the feature's API
    routes (docs/console.md)."""

    key: str  # the page is /pallas/pages/<key>
    title: str  # its word in the menu
    intro: str  # one sentence under its heading
    script: Path  # the feature's script file


# What a feature lets the owner do from a person's page (persona's "lift" of a silence or a
# blacklisting, memory's correcting and forgetting): (person id, the form's fields, now) ->
# whether anything changed. The action checks its fields and that they concern this person.
PersonAction = Callable[[int, Mapping[str, str], datetime], Awaitable[bool]]


@dataclass(frozen=True)
class Check:
    """One line a feature adds to `python -m pallas doctor`: what was checked and found, and
    what to do when it is not well."""

    ok: bool
    what: str
    fix: str = ""
    warn: bool = False  # worth a look, nothing is broken


# A feature's own checks of the set-up, from the settings (`Extension.checks`).
DoctorChecks = Callable[[Any], Awaitable[Sequence[Check]]]
