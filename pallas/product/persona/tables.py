"""Persona's tables: rage, silences, the blacklist, favorability, relation notes, its own
style, chat sessions and promises (docs/persona.md). They share the one metadata; their
history is the core's migrations (made before the feature seam, docs/architecture.md)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, BigInteger, Boolean, Float, ForeignKey, Index, String
from sqlalchemy.orm import Mapped, mapped_column

from pallas.store.schema_base import Base, Id, UtcDateTime


class RageState(Base):
    """Short-term pressure from one person's attacks on the bot in one chat (a chat belongs to
    one bot account); it decays with time (docs/persona.md)."""

    __tablename__ = "rage_state"

    stream_id: Mapped[int] = mapped_column(Id, ForeignKey("stream.id"), primary_key=True)
    person_id: Mapped[int] = mapped_column(Id, ForeignKey("person.id"), primary_key=True)
    pressure: Mapped[float] = mapped_column(Float)  # as of updated_at
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime())
    silenced_until: Mapped[datetime | None] = mapped_column(UtcDateTime())
    # An owner's last forgiveness: silences before it do not count towards a blacklist.
    forgiven_at: Mapped[datetime | None] = mapped_column(UtcDateTime())


class RageSilence(Base):
    """One silence that rage imposed: two within 24 hours put the person on the blacklist."""

    __tablename__ = "rage_silence"
    __table_args__ = (Index("ix_rage_silence_who", "stream_id", "person_id", "started_at"),)

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    stream_id: Mapped[int] = mapped_column(Id, ForeignKey("stream.id"))
    person_id: Mapped[int] = mapped_column(Id, ForeignKey("person.id"))
    started_at: Mapped[datetime] = mapped_column(UtcDateTime())
    until: Mapped[datetime] = mapped_column(UtcDateTime())
    pressure: Mapped[float] = mapped_column(Float)


class Blacklist(Base):
    """People the bot ignores in one chat until an owner lifts it (automatic or by an owner)."""

    __tablename__ = "blacklist"

    stream_id: Mapped[int] = mapped_column(Id, ForeignKey("stream.id"), primary_key=True)
    person_id: Mapped[int] = mapped_column(Id, ForeignKey("person.id"), primary_key=True)
    added_at: Mapped[datetime] = mapped_column(UtcDateTime())
    source: Mapped[str] = mapped_column(String(16))  # auto / owner
    reason: Mapped[str] = mapped_column(String(200))
    lifted_at: Mapped[datetime | None] = mapped_column(UtcDateTime())


class Favorability(Base):
    """How one bot account feels about a person in the long run: a score in [-100, 100]."""

    __tablename__ = "favorability"

    self_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    person_id: Mapped[int] = mapped_column(Id, ForeignKey("person.id"), primary_key=True)
    score: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime())
    warmed_on: Mapped[str] = mapped_column(String(10), default="")  # the last friendly day


class RelationNote(Base):
    """A stable note about a person (how to address them, who they are to someone): taught by
    an owner or observed from what they said of themselves; never a judgment of character."""

    __tablename__ = "relation_note"
    __table_args__ = (Index("ix_relation_note_who", "self_id", "person_id"),)

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    self_id: Mapped[str] = mapped_column(String(64))
    person_id: Mapped[int] = mapped_column(Id, ForeignKey("person.id"))
    text: Mapped[str] = mapped_column(String(200))
    source: Mapped[str] = mapped_column(String(16))  # owner / observed
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())
    active: Mapped[bool] = mapped_column(Boolean, default=True)


class BotMood(Base):
    """One bot account's mood: a valence in [-1, 1] as of a time; it drifts back to calm."""

    __tablename__ = "bot_mood"

    self_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    valence: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime())


class BotStyle(Base):
    """One bot account's expression fingerprint: phrases from its replies that landed well.
    Attacks never touch it."""

    __tablename__ = "bot_voice"

    self_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    phrases: Mapped[list[str]] = mapped_column(JSON)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime())


class ChatSession(Base):
    """The current session of a chat: when it began after a long quiet, the tone it rolled,
    and whether a private chat's "long time no see" hint is still to be given."""

    __tablename__ = "chat_session"

    stream_id: Mapped[int] = mapped_column(Id, ForeignKey("stream.id"), primary_key=True)
    started_at: Mapped[datetime] = mapped_column(UtcDateTime())
    tone: Mapped[str] = mapped_column(String(64))
    resumption: Mapped[str] = mapped_column(String(200), default="")  # given once, then ""


class Promise(Base):
    """Something the bot promised an owner it would do (only owners' words make one): open
    until kept (its time came and the bot's own turn ran), dropped by an owner, or expired."""

    __tablename__ = "promise"
    __table_args__ = (Index("ix_promise_stream_state", "stream_id", "state"),)

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    self_id: Mapped[str] = mapped_column(String(64))
    stream_id: Mapped[int] = mapped_column(Id, ForeignKey("stream.id"))
    person_id: Mapped[int] = mapped_column(Id, ForeignKey("person.id"))  # the owner asking
    text: Mapped[str] = mapped_column(String(200))
    made_at: Mapped[datetime] = mapped_column(UtcDateTime())
    due_at: Mapped[datetime | None] = mapped_column(UtcDateTime())  # None: no time was said
    turn_id: Mapped[int | None] = mapped_column(BigInteger)  # the turn that made it
    state: Mapped[str] = mapped_column(String(16))  # open / kept / dropped / expired
    closed_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
