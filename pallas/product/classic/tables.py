"""Learned lines' tables (core migration 0020, as every built-in feature's)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Index, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from pallas.store.schema_base import Base, Id, UtcDateTime


class LearnedPair(Base):
    """A context and the answer members gave it in one group, with how often and by how many."""

    __tablename__ = "classic_pair"
    __table_args__ = (
        UniqueConstraint("stream_id", "context_hash", "answer_hash"),
        Index("ix_classic_pair_context_hash", "context_hash"),
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    stream_id: Mapped[int] = mapped_column(BigInteger)
    context_hash: Mapped[str] = mapped_column(String(32))
    context_text: Mapped[str] = mapped_column(String(120))
    answer_hash: Mapped[str] = mapped_column(String(32))
    answer_text: Mapped[str] = mapped_column(String(200))
    answer_segments: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    count: Mapped[int] = mapped_column(Integer, default=1)
    answerers: Mapped[int] = mapped_column(Integer, default=1)
    first_seen: Mapped[datetime] = mapped_column(UtcDateTime())
    last_seen: Mapped[datetime] = mapped_column(UtcDateTime())


class LearnedAnswerer(Base):
    """Who gave a pair's answer, and when last: one person counts once per while."""

    __tablename__ = "classic_answerer"

    pair_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    person_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    last_at: Mapped[datetime] = mapped_column(UtcDateTime())


class LearnedBan(Base):
    """An answer never said again for a context: in one group, or everywhere (no stream)."""

    __tablename__ = "classic_ban"
    __table_args__ = (Index("ix_classic_ban_context_hash", "context_hash"),)

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    stream_id: Mapped[int | None] = mapped_column(BigInteger)
    context_hash: Mapped[str] = mapped_column(String(32))
    context_text: Mapped[str] = mapped_column(String(120))
    answer_hash: Mapped[str] = mapped_column(String(32))
    answer_text: Mapped[str] = mapped_column(String(200))
    banned_by: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())


class LearnedOptOut(Base):
    """A member who asked not to be learned from."""

    __tablename__ = "classic_opt_out"

    person_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())
