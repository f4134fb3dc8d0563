"""The schema. Migrations in `migrations/versions` must produce exactly this."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from pallas.store.schema_base import NAMING, Base, Id, UtcDateTime

__all__ = ["NAMING", "Base", "Id", "UtcDateTime"]


GROUP_KIND_SQL = "kind = 'group'"


class Stream(Base):
    """A conversation: one group (shared by every account of the bot in it) or one private
    chat (one account's). A group's `self_id` is the account that saw it first; which
    account speaks there is decided per message (docs/accounts.md)."""

    __tablename__ = "stream"
    __table_args__ = (
        UniqueConstraint("platform", "self_id", "kind", "external_id"),
        # One row per group, whichever accounts see it.
        Index(
            "uq_stream_group",
            "platform",
            "external_id",
            unique=True,
            sqlite_where=text(GROUP_KIND_SQL),
            postgresql_where=text(GROUP_KIND_SQL),
        ),
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    platform: Mapped[str] = mapped_column(String(16))
    self_id: Mapped[str] = mapped_column(String(32))
    kind: Mapped[str] = mapped_column(String(8))
    external_id: Mapped[str] = mapped_column(String(64))
    name: Mapped[str] = mapped_column(String(128), default="")
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())
    # A temporary private chat: the group it was opened through, which replies must name.
    via_group: Mapped[str | None] = mapped_column(String(64))


class Person(Base):
    """A human (or the bot) behind one or more platform identities."""

    __tablename__ = "person"

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    display_name: Mapped[str] = mapped_column(String(128), default="")
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())


class Identity(Base):
    """A platform user id, mapped to the person it belongs to."""

    __tablename__ = "identity"
    __table_args__ = (UniqueConstraint("platform", "user_id"),)

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    platform: Mapped[str] = mapped_column(String(16))
    user_id: Mapped[str] = mapped_column(String(64))
    person_id: Mapped[int] = mapped_column(Id, ForeignKey("person.id"), index=True)
    nickname: Mapped[str] = mapped_column(String(128), default="")
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())


class Member(Base):
    """A person as one group knows them: the card shown there, their role, their title."""

    __tablename__ = "member"

    stream_id: Mapped[int] = mapped_column(Id, ForeignKey("stream.id"), primary_key=True)
    person_id: Mapped[int] = mapped_column(Id, ForeignKey("person.id"), primary_key=True)
    card: Mapped[str] = mapped_column(String(128), default="")
    role: Mapped[str] = mapped_column(String(16), default="")  # owner / admin / member
    title: Mapped[str] = mapped_column(String(64), default="")
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime())


class Message(Base):
    """The timeline. A recall only sets `recalled`; rows go only by retention, past their
    age and never while something holds them (docs/retention.md)."""

    __tablename__ = "message"
    __table_args__ = (
        UniqueConstraint("stream_id", "platform_message_id"),
        Index("ix_message_stream_id_id", "stream_id", "id"),
        Index("ix_message_time_id", "time", "id"),  # periodic scans resume by (time, id)
        # QQ's own sequence number: the same message seen by several accounts is one row.
        Index("uq_message_stream_id_seq_key", "stream_id", "seq_key", unique=True),
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    stream_id: Mapped[int] = mapped_column(Id, ForeignKey("stream.id"))
    sender_person_id: Mapped[int] = mapped_column(Id, ForeignKey("person.id"), index=True)
    platform_message_id: Mapped[str] = mapped_column(String(64))
    time: Mapped[datetime] = mapped_column(UtcDateTime())
    stored_at: Mapped[datetime] = mapped_column(UtcDateTime())
    text: Mapped[str] = mapped_column(Text)
    segments: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    reply_to: Mapped[str | None] = mapped_column(String(64))
    mentions: Mapped[list[str]] = mapped_column(JSON)
    mentions_all: Mapped[bool] = mapped_column(Boolean, default=False)
    is_poke: Mapped[bool] = mapped_column(Boolean, default=False)
    from_bot: Mapped[bool] = mapped_column(Boolean, default=False)
    # The bot's own message: the Origin of the outbox row that sent it, when known.
    origin: Mapped[str | None] = mapped_column(String(16))
    recalled: Mapped[bool] = mapped_column(Boolean, default=False)
    suppressed: Mapped[bool] = mapped_column(Boolean, default=False)
    truncated: Mapped[bool] = mapped_column(Boolean, default=False)
    # The turn that consumed this message; empty while it waits (or was never admitted).
    turn_id: Mapped[int | None] = mapped_column(BigInteger)
    # The account whose copy was stored (its `platform_message_id`); empty before 0021.
    account: Mapped[str | None] = mapped_column(String(32))
    # What QQ keeps the same for every account (`s:<real_seq>`), when the platform says.
    seq_key: Mapped[str | None] = mapped_column(String(64))
    # The process that stored it and so gates and buffers it (docs/scaling.md); empty
    # before 0026.
    stored_by: Mapped[str | None] = mapped_column(String(64))


class MessageCopy(Base):
    """Another account's copy of a stored message: its own id for it (a recall, a quote and
    a reaction name the message by the id of the account they come through)."""

    __tablename__ = "message_copy"
    __table_args__ = (Index("ix_message_copy_platform_message_id", "platform_message_id"),)

    message_id: Mapped[int] = mapped_column(Id, ForeignKey("message.id"), primary_key=True)
    self_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    platform_message_id: Mapped[str] = mapped_column(String(64))


class StreamAccount(Base):
    """An account of the bot in a group: seen there, and whether it is still a member."""

    __tablename__ = "stream_account"

    stream_id: Mapped[int] = mapped_column(Id, ForeignKey("stream.id"), primary_key=True)
    self_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    first_seen_at: Mapped[datetime] = mapped_column(UtcDateTime())
    last_seen_at: Mapped[datetime] = mapped_column(UtcDateTime())
    left_at: Mapped[datetime | None] = mapped_column(UtcDateTime())  # kicked, or left


class Event(Base):
    """The audit ledger: every decision and notable fact, with the turn it belongs to."""

    __tablename__ = "event"
    __table_args__ = (
        Index("ix_event_kind_created_at", "kind", "created_at"),
        Index("ix_event_stream_id_created_at", "stream_id", "created_at"),
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    kind: Mapped[str] = mapped_column(String(32))
    turn_id: Mapped[int | None] = mapped_column(BigInteger, index=True)
    stream_id: Mapped[int | None] = mapped_column(Id, ForeignKey("stream.id"))
    person_id: Mapped[int | None] = mapped_column(Id, ForeignKey("person.id"))
    message_id: Mapped[int | None] = mapped_column(Id, ForeignKey("message.id"), index=True)
    reason: Mapped[str] = mapped_column(String(64), default="")
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())


class StreamPolicy(Base):
    """A group's overrides of the gate knobs (see GatePolicy); edited from the console."""

    __tablename__ = "stream_policy"

    stream_id: Mapped[int] = mapped_column(Id, ForeignKey("stream.id"), primary_key=True)
    overrides: Mapped[dict[str, Any]] = mapped_column(JSON)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime())


class StreamState(Base):
    """Conversation state that must survive a restart."""

    __tablename__ = "stream_state"

    stream_id: Mapped[int] = mapped_column(Id, ForeignKey("stream.id"), primary_key=True)
    # The bot looked at the last exchange and chose silence: the natural window is closed.
    follow_up_declined: Mapped[bool] = mapped_column(Boolean, default=False)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime())


class LlmCall(Base):
    """One attempt at one model call: what it was for, who answered, and what it cost."""

    __tablename__ = "llm_call"

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), index=True)
    purpose: Mapped[str] = mapped_column(String(32))
    model_type: Mapped[str] = mapped_column(String(16))
    model: Mapped[str] = mapped_column(String(128))
    upstream_model: Mapped[str] = mapped_column(String(128))
    provider: Mapped[str] = mapped_column(String(64))
    stream_id: Mapped[int | None] = mapped_column(Id, ForeignKey("stream.id"))
    turn_id: Mapped[int | None] = mapped_column(BigInteger)
    prompt_tokens: Mapped[int] = mapped_column(Integer, default=0)
    completion_tokens: Mapped[int] = mapped_column(Integer, default=0)
    cached_tokens: Mapped[int] = mapped_column(Integer, default=0)
    usage_estimated: Mapped[bool] = mapped_column(Boolean, default=False)
    cost: Mapped[float] = mapped_column(Float, default=0.0)
    latency_ms: Mapped[float] = mapped_column(Float, default=0.0)
    outcome: Mapped[str] = mapped_column(String(32))
    error: Mapped[str] = mapped_column(Text, default="")
    attempt: Mapped[int] = mapped_column(Integer, default=1)


class CapabilitySetting(Base):
    """An owner's switch or override for a tool, function plugin or skill, by its stable name.

    Only exceptions are stored: a missing row (or a null column) means the default.
    """

    __tablename__ = "capability_setting"

    kind: Mapped[str] = mapped_column(String(16), primary_key=True)  # tool / plugin / skill
    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    enabled: Mapped[bool | None] = mapped_column(Boolean)
    embedded: Mapped[bool | None] = mapped_column(Boolean)  # skills: in every prompt
    overrides: Mapped[dict[str, Any]] = mapped_column(JSON)  # tools: description/hints/visibility
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime())


class ToolActivation(Base):
    """A deferred tool brought into a conversation (by `tools.find`) until `expires_at`."""

    __tablename__ = "tool_activation"

    stream_id: Mapped[int] = mapped_column(Id, ForeignKey("stream.id"), primary_key=True)
    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    expires_at: Mapped[datetime] = mapped_column(UtcDateTime())


class Reply(Base):
    """A reply the agent decided on: its bubbles, committed with its outbox rows."""

    __tablename__ = "reply"

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    turn_id: Mapped[int | None] = mapped_column(BigInteger, index=True)
    stream_id: Mapped[int] = mapped_column(Id, ForeignKey("stream.id"))
    bubbles: Mapped[list[str]] = mapped_column(JSON)
    quote: Mapped[str | None] = mapped_column(String(64))  # platform id quoted by bubble 1
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())


OPEN_STATUS_SQL = "status IN ('pending', 'sending')"  # an outbox row not yet settled


class OutboxItem(Base):
    """One outgoing action (a bubble, a poke, a reaction) until the platform confirms it."""

    __tablename__ = "outbox"
    __table_args__ = (
        Index("ix_outbox_status_stream_id_id", "status", "stream_id", "id"),
        # The open rows only: the dispatcher finds each chat's head by skipping along it, so
        # its query does not grow with a backlog (OutboxStore.heads).
        Index(
            "ix_outbox_open_stream_id_id",
            "stream_id",
            "id",
            sqlite_where=text(OPEN_STATUS_SQL),
            postgresql_where=text(OPEN_STATUS_SQL),
        ),
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    reply_id: Mapped[int | None] = mapped_column(Id, ForeignKey("reply.id"))
    turn_id: Mapped[int | None] = mapped_column(BigInteger)
    stream_id: Mapped[int] = mapped_column(Id, ForeignKey("stream.id"))
    kind: Mapped[str] = mapped_column(String(16))  # an OutboxKind: message / poke / react
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    # The part of the bot it comes from (an Origin): the gate counts only conversation.
    origin: Mapped[str] = mapped_column(String(16), default="agent_reply")
    # Answers a direct call (@, reply, poke, private chat): never dropped for a crowded queue.
    direct: Mapped[bool] = mapped_column(Boolean, default=False)
    # pending -> sending -> sent; or failed / unknown / expired / dropped (final)
    status: Mapped[str] = mapped_column(String(16))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    not_before: Mapped[datetime] = mapped_column(UtcDateTime())  # pacing and retry backoff
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime())
    last_error: Mapped[str] = mapped_column(Text, default="")
    platform_message_id: Mapped[str | None] = mapped_column(String(64))
    # Set by senders that may run twice for the same cause (a responder re-run at start-up):
    # the second enqueue finds the first row instead of adding another.
    idempotency_key: Mapped[str | None] = mapped_column(String(200), unique=True)
    # The account that sends it; empty: the group's speaker when it goes (docs/accounts.md).
    account: Mapped[str | None] = mapped_column(String(32))
    # The process that marked it `sending`: only it settles the row while it is alive
    # (docs/scaling.md).
    holder: Mapped[str | None] = mapped_column(String(64))


class Job(Base):
    """Durable work done off a turn's path (docs/jobs.md): claimed under a lease, retried."""

    __tablename__ = "job"
    # Due pending jobs by due time; expired leases by expiry (a claim searches both).
    __table_args__ = (
        Index("ix_job_status_due_at", "status", "due_at"),
        Index("ix_job_status_lease_expires_at", "status", "lease_expires_at"),
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    kind: Mapped[str] = mapped_column(String(64))
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    # A second job with the same key is not created (a periodic job's run, a turn's follow-up).
    idempotency_key: Mapped[str | None] = mapped_column(String(200), unique=True)
    # pending -> running -> done; running -> pending (retry) ; running -> failed (final)
    status: Mapped[str] = mapped_column(String(16))
    due_at: Mapped[datetime] = mapped_column(UtcDateTime())
    lease_holder: Mapped[str | None] = mapped_column(String(64))
    lease_expires_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    max_attempts: Mapped[int] = mapped_column(Integer, default=5)
    last_error: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime())


class Asset(Base):
    """A media file under PALLAS_DATA_DIR/assets, stored once by its content's hash; messages
    and outbox rows refer to it as `asset:<path>`, nothing binary is in the database."""

    __tablename__ = "asset"

    sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    path: Mapped[str] = mapped_column(String(200))  # relative to the assets folder
    mime: Mapped[str] = mapped_column(String(64))
    size: Mapped[int] = mapped_column(BigInteger)
    width: Mapped[int] = mapped_column(Integer)
    height: Mapped[int] = mapped_column(Integer)
    source: Mapped[str] = mapped_column(String(16))  # platform / owner / generated
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())
    # Retention drops the least recently used first.
    last_used_at: Mapped[datetime] = mapped_column(UtcDateTime(), index=True)
    # What the vision model saw in it (empty: never looked at); written once, reused by every
    # message that carries the same file (docs/media.md).
    description: Mapped[str] = mapped_column(Text, default="", server_default="")
    # For a sticker, the feelings it shows (space-separated, from the vision vocabulary).
    emotions: Mapped[str] = mapped_column(String(200), default="", server_default="")
    # The last time the vision model was asked about it: the hourly labelling budget counts these.
    labelled_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), index=True)


class ScanCursor(Base):
    """Where a periodic scan of the timeline stopped: (time, message id) of the last row read."""

    __tablename__ = "scan_cursor"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    after_time: Mapped[datetime] = mapped_column(UtcDateTime())
    after_message_id: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime())


class BotCharacter(Base):
    """Who one bot account is and how it talks (its character); seeded from config/agent.yml
    on first use, then edited (the owner's /人设, the console). The table keeps its name."""

    __tablename__ = "bot_persona"

    self_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(64))
    description: Mapped[str] = mapped_column(Text)
    style: Mapped[str] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime())


class SettingValues(Base):
    """One settings section's stored values for one scope (a chat, an account, or "global"):
    only what differs from the section's defaults (pallas/product/settings)."""

    __tablename__ = "setting"

    section: Mapped[str] = mapped_column(String(32), primary_key=True)
    scope_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    values: Mapped[dict[str, Any]] = mapped_column(JSON)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime())


class SettingChange(Base):
    """Every change of a settings section, as stored before and after: what was in force at
    a past moment (the replay of a recorded day under that day's settings)."""

    __tablename__ = "setting_change"
    __table_args__ = (
        Index("ix_setting_change_section_scope_id_changed_at", "section", "scope_id", "changed_at"),
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    section: Mapped[str] = mapped_column(String(32))
    scope_id: Mapped[str] = mapped_column(String(64))
    before: Mapped[dict[str, Any]] = mapped_column(JSON)
    after: Mapped[dict[str, Any]] = mapped_column(JSON)
    changed_at: Mapped[datetime] = mapped_column(UtcDateTime())


class BotProcess(Base):
    """A bot process sharing the store, under one lease it renews (docs/scaling.md). Every
    claim it makes (a chat's turn, an outbox row being sent, the messages it stored) is
    good while this lease is; once it expires another process recovers what it left and
    sets `recovered_at`."""

    __tablename__ = "bot_process"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    run_id: Mapped[str] = mapped_column(String(32))  # this run of the name
    started_at: Mapped[datetime] = mapped_column(UtcDateTime())
    heartbeat_at: Mapped[datetime] = mapped_column(UtcDateTime())
    expires_at: Mapped[datetime] = mapped_column(UtcDateTime())
    accounts: Mapped[list[str]] = mapped_column(JSON)  # the accounts connected to it
    recovered_by: Mapped[str | None] = mapped_column(String(64))
    recovered_at: Mapped[datetime | None] = mapped_column(UtcDateTime())


class ChatTurn(Base):
    """Which process runs the chat's turns now: one turn at a time per chat across
    processes. The row stays after the turn; it passes on when its holder is this process,
    or a process whose leftovers were recovered."""

    __tablename__ = "chat_turn"

    stream_id: Mapped[int] = mapped_column(
        Id, ForeignKey("stream.id", ondelete="CASCADE"), primary_key=True
    )
    holder: Mapped[str | None] = mapped_column(String(64))  # empty: between turns
    taken_at: Mapped[datetime] = mapped_column(UtcDateTime())


class IdBlock(Base):
    """Counters handed out in blocks: each process numbers its turns from its own block."""

    __tablename__ = "id_block"

    name: Mapped[str] = mapped_column(String(32), primary_key=True)
    last: Mapped[int] = mapped_column(BigInteger)
