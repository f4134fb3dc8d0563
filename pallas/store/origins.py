"""The bot's talk in SQL: which stored origins count as the bot speaking (core.actions)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, or_

from pallas.core.actions import CONVERSATIONAL


def spoken(origin: Any) -> ColumnElement[bool]:
    """`origin` (a message's or an outbox row's) is the bot's talk; no origin counts too."""
    return or_(origin.is_(None), origin.in_([value.value for value in CONVERSATIONAL]))
