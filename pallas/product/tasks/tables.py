"""Reminders' and research tasks' tables (core migrations 0022 and 0023, as every built-in
feature's)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Index, String
from sqlalchemy.orm import Mapped, mapped_column

from pallas.store.schema_base import Base, Id, UtcDateTime


class ReminderRow(Base):
    """A reminder someone asked for: what to say, where, when next; open until it fired for
    the last time or was cancelled."""

    __tablename__ = "reminder"
    __table_args__ = (
        Index("ix_reminder_person_id_status", "person_id", "status"),
        Index("ix_reminder_stream_id_status", "stream_id", "status"),
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    stream_id: Mapped[int] = mapped_column(BigInteger)  # the chat that asked: it is said there
    person_id: Mapped[int] = mapped_column(BigInteger)  # who asked
    user_id: Mapped[str] = mapped_column(String(64))  # their id: in a group the reminder @s it
    account: Mapped[str] = mapped_column(String(32))  # the bot's account that took it
    text: Mapped[str] = mapped_column(String(500))
    due_at: Mapped[datetime] = mapped_column(UtcDateTime())  # the next time it fires
    rhythm: Mapped[dict[str, Any] | None] = mapped_column(JSON)  # a repeating one's rhythm
    status: Mapped[str] = mapped_column(String(16))  # open / done / cancelled
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime())


class ResearchRow(Base):
    """A question someone asked the bot to look up in the background: running until it was
    answered, gave up, or was cancelled."""

    __tablename__ = "research"
    __table_args__ = (
        Index("ix_research_person_id_status", "person_id", "status"),
        Index("ix_research_stream_id_status", "stream_id", "status"),
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    stream_id: Mapped[int] = mapped_column(BigInteger)  # the chat that asked: answered there
    person_id: Mapped[int] = mapped_column(BigInteger)  # who asked
    user_id: Mapped[str] = mapped_column(String(64))  # their id: in a group the answer @s it
    account: Mapped[str] = mapped_column(String(32))  # the bot's account that took it
    question: Mapped[str] = mapped_column(String(500))
    status: Mapped[str] = mapped_column(String(16))  # running / done / cancelled / failed
    outcome: Mapped[str] = mapped_column(String(200))  # how it ended (answered, timeout, …)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime())
