"""Memory's tables (docs/memory.md): entries, their keyword index and vectors, the undo
log, consent and the extraction's cursors. They share the one metadata; their history is
the core's migrations (they were made before the feature seam), see docs/architecture.md."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
)
from sqlalchemy.orm import Mapped, mapped_column

from pallas.store.schema_base import Base, Id, UtcDateTime


class MemoryEntry(Base):
    """One thing worth knowing later (docs/memory.md): a person fact, a group entry, an
    episode, or a behaviour the group taught. Never deleted by forgetting: its status says so."""

    __tablename__ = "memory_entry"
    __table_args__ = (
        Index(
            "ix_memory_entry_stream_id_person_id_kind_status",
            "stream_id",
            "person_id",
            "kind",
            "status",
        ),
        Index("ix_memory_entry_person_id_status", "person_id", "status"),
        Index("ix_memory_entry_taught_by_created_at", "taught_by", "created_at"),
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    kind: Mapped[str] = mapped_column(String(16))  # fact / episode / behavior
    # Where it was learned; a person fact is shown elsewhere only with their consent.
    stream_id: Mapped[int] = mapped_column(Id, ForeignKey("stream.id"))
    person_id: Mapped[int | None] = mapped_column(Id, ForeignKey("person.id"))  # None: the group
    text: Mapped[str] = mapped_column(Text)
    source: Mapped[str] = mapped_column(String(32))  # extraction / correction / owner / ...
    source_message_ids: Mapped[list[int]] = mapped_column(JSON)
    taught_by: Mapped[int | None] = mapped_column(Id, ForeignKey("person.id"))
    job_id: Mapped[int | None] = mapped_column(BigInteger)
    confidence: Mapped[float] = mapped_column(Float)
    reinforced: Mapped[int] = mapped_column(Integer, default=0)  # said again, merged in
    status: Mapped[str] = mapped_column(String(16))  # active / forgotten / faded
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime())
    last_seen_at: Mapped[datetime] = mapped_column(UtcDateTime())  # decay counts from here
    # The model and size of its vector in memory_vector; empty / 0 while it has none.
    embedding_model: Mapped[str] = mapped_column(String(128), default="")
    embedding_dim: Mapped[int] = mapped_column(Integer, default=0)


class MemoryTerm(Base):
    """The keyword index: CJK bigrams and whole Latin words (pallas/core/terms.py), filed
    under the entry's owner ("p<person>" or "s<stream>") so recall reads only who is present."""

    __tablename__ = "memory_term"
    # The primary key is the whole row: on SQLite no second copy of it as a rowid table.
    __table_args__ = ({"sqlite_with_rowid": False},)

    owner: Mapped[str] = mapped_column(String(24), primary_key=True)
    term: Mapped[str] = mapped_column(String(32), primary_key=True)
    entry_id: Mapped[int] = mapped_column(
        Id, ForeignKey("memory_entry.id", ondelete="CASCADE"), primary_key=True, index=True
    )


class MemoryVector(Base):
    """An active entry's vector, found like its terms by the entry's owner: recall reads the
    present people's vectors through the primary key's index, without the entries' text. It
    carries what visibility needs (chat, kind), so no join is made; only active entries have
    one (forgetting, fading or rewording an entry removes it). A table with rowids: a 1 KB
    vector would overflow every page of a table without them."""

    __tablename__ = "memory_vector"

    owner: Mapped[str] = mapped_column(String(24), primary_key=True)
    model: Mapped[str] = mapped_column(String(128), primary_key=True)
    entry_id: Mapped[int] = mapped_column(
        Id, ForeignKey("memory_entry.id", ondelete="CASCADE"), primary_key=True, index=True
    )
    dim: Mapped[int] = mapped_column(Integer)
    stream_id: Mapped[int] = mapped_column(Id)
    kind: Mapped[str] = mapped_column(String(16))
    vector: Mapped[bytes] = mapped_column(LargeBinary)  # float32, little-endian


class MemoryChange(Base):
    """The memory's audit and undo log: every write, merge, correction and forgetting."""

    __tablename__ = "memory_change"

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    entry_id: Mapped[int] = mapped_column(Id, ForeignKey("memory_entry.id"), index=True)
    action: Mapped[str] = mapped_column(String(16))  # created / merged / corrected / ...
    actor: Mapped[str] = mapped_column(String(64))  # extraction job, a tool call, the owner
    before: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    after: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    turn_id: Mapped[int | None] = mapped_column(BigInteger)
    at: Mapped[datetime] = mapped_column(UtcDateTime())


class MemoryConsent(Base):
    """A person agreed that their facts may be used in every group (not only where learned)."""

    __tablename__ = "memory_consent"

    person_id: Mapped[int] = mapped_column(Id, ForeignKey("person.id"), primary_key=True)
    granted_at: Mapped[datetime] = mapped_column(UtcDateTime())
    message_id: Mapped[int | None] = mapped_column(BigInteger)  # where they said so


class MemoryCursor(Base):
    """How far the extraction has read a chat's timeline: the observation queue is what lies
    after `last_message_id`."""

    __tablename__ = "memory_cursor"

    stream_id: Mapped[int] = mapped_column(Id, ForeignKey("stream.id"), primary_key=True)
    last_message_id: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime())
