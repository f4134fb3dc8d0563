"""The group's own words and how its people answer (core migration 0025, as every built-in
feature's tables): docs/slang.md."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, BigInteger, Float, ForeignKey, Index, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from pallas.store.schema_base import Base, Id, UtcDateTime


class SlangTerm(Base):
    """A term a group uses: a candidate while `meaning` is empty, then what it means there."""

    __tablename__ = "slang_term"
    __table_args__ = (UniqueConstraint("stream_id", "term"),)

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    stream_id: Mapped[int] = mapped_column(Id, ForeignKey("stream.id", ondelete="CASCADE"))
    term: Mapped[str] = mapped_column(String(32))  # simplified, lower-cased
    meaning: Mapped[str | None] = mapped_column(String(200))
    source: Mapped[str] = mapped_column(String(16))  # "" candidate / learned / admin
    lines: Mapped[int] = mapped_column(Integer)  # lines it was used in, over every run
    members: Mapped[list[str]] = mapped_column(JSON)  # who used it (at most 20 ids)
    evidence: Mapped[list[int]] = mapped_column(JSON)  # the newest lines it was used in
    confidence: Mapped[float] = mapped_column(Float)
    first_seen: Mapped[datetime] = mapped_column(UtcDateTime())
    last_seen: Mapped[datetime] = mapped_column(UtcDateTime())
    learned_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    learned_lines: Mapped[int] = mapped_column(Integer)  # `lines` when it was learned
    learned_from: Mapped[list[int]] = mapped_column(JSON)  # the lines its meaning came from
    taught_by: Mapped[str] = mapped_column(String(64))  # extraction, qq:<admin>, console
    offers: Mapped[int] = mapped_column(Integer)  # times offered to the model unlearned
    offered_lines: Mapped[int] = mapped_column(Integer)  # `lines` when last offered
    last_used_at: Mapped[datetime | None] = mapped_column(UtcDateTime())  # shown in a turn


class ExpressionSample(Base):
    """A member's short answer, kept as an example of how this group talks."""

    __tablename__ = "expression_sample"
    __table_args__ = (
        UniqueConstraint("stream_id", "message_id"),
        Index("ix_expression_sample_message_id", "message_id"),
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    stream_id: Mapped[int] = mapped_column(Id, ForeignKey("stream.id", ondelete="CASCADE"))
    # The line itself: it goes when the timeline's row goes (retention, a forgotten person).
    message_id: Mapped[int] = mapped_column(Id, ForeignKey("message.id", ondelete="CASCADE"))
    text: Mapped[str] = mapped_column(String(100))
    cue: Mapped[str] = mapped_column(String(100))  # the line it answered
    weight: Mapped[float] = mapped_column(Float)  # 1, and more each time it was answered
    kept_at: Mapped[datetime] = mapped_column(UtcDateTime())


class SlangCursor(Base):
    """How far noticing has counted a chat's lines: a run that fails before its call is read
    again by the next, and nothing is counted twice."""

    __tablename__ = "slang_cursor"

    stream_id: Mapped[int] = mapped_column(
        Id, ForeignKey("stream.id", ondelete="CASCADE"), primary_key=True
    )
    last_message_id: Mapped[int] = mapped_column(BigInteger)
