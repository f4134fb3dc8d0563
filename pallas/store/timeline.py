"""The timeline writer: group commit of inbound facts, idempotent on the platform message id.

Concurrent callers share one transaction (see group_commit.py); each resumes only once its
own row is committed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from pallas.core.clock import utc_now
from pallas.core.inbound import (
    ForwardContent,
    GroupNotice,
    InboundEvent,
    InboundMessage,
    MemberChange,
    MemberProfile,
    NoticeKind,
    Recall,
    StreamKind,
)
from pallas.store.audit import EventKind
from pallas.store.database import Database
from pallas.store.forwards import fill_in_forward
from pallas.store.group_commit import GroupCommitter, WriterClosedError
from pallas.store.identities import KnownUser, PersonResolver, StreamResolver, UserKey
from pallas.store.members import GroupDirectory
from pallas.store.models import Event, Message
from pallas.store.poke_echoes import merge_own_poke_echoes
from pallas.store.shared_chats import (
    COPY_WINDOW_S,
    CopyOf,
    GroupAccounts,
    copies_by_seq,
    copy_by_content,
    keep_copies,
    learn_sequence,
    message_by_copy,
    notice_seen,
    stored_id_of,
)
from pallas.store.sql import insert_ignoring_conflicts


@dataclass(frozen=True)
class MessageWritten:
    message_id: int
    stream_id: int
    person_id: int
    duplicate: bool
    copy: bool = False  # the duplicate is another account's copy of the message


@dataclass(frozen=True)
class NoticeWritten:
    stream_id: int
    person_id: int | None  # None when the notice names nobody (a whole-group ban, say)
    message_id: int | None = None  # the message concerned, when it is in the timeline
    duplicate: bool = False  # another account reported the same join or leave already


WriteOutcome = MessageWritten | NoticeWritten
# Reactions are recorded only on the bot's own messages: what others' messages get is noise.
_BOT_MESSAGE_ONLY = frozenset({NoticeKind.REACTION_ADDED, NoticeKind.REACTION_REMOVED})
__all__ = ["MessageWritten", "NoticeWritten", "TimelineWriter", "WriteOutcome", "WriterClosedError"]
Clock = Callable[[], datetime]


class TimelineWriter:
    """Accepts inbound facts from many tasks and commits them in shared transactions."""

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        clock: Clock = utc_now,
        max_batch: int = 500,
    ) -> None:
        self._engine = engine
        self._clock = clock
        self._streams = StreamResolver()
        self._people = PersonResolver()
        self._groups = GroupDirectory()
        self._accounts = GroupAccounts()
        self.stored_by: str | None = None  # this process's name, on each message it stores
        self._committer: GroupCommitter[InboundEvent, WriteOutcome] = GroupCommitter(
            "timeline writer",
            self._apply,
            max_batch=max_batch,
            writes=Database.of(engine).writes(),
        )

    def start(self) -> None:
        self._committer.start()

    async def close(self) -> None:
        """Commit everything already accepted, then stop."""
        await self._committer.close()

    async def write(self, item: InboundEvent) -> WriteOutcome:
        return await self._committer.submit(item)

    async def _apply(self, items: Sequence[InboundEvent]) -> list[WriteOutcome]:
        now = self._clock()
        try:
            async with self._engine.begin() as conn:
                streams = await self._streams.resolve(conn, {i.stream for i in items}, now)
                people = await self._people.resolve(conn, _users(items), now)
                items = await merge_own_poke_echoes(conn, items, streams)
                batch = _Batch(conn, now, streams, people, self._groups, self._accounts)
                batch.stored_by = self.stored_by
                outcomes = await batch.apply(items)
        except BaseException:
            self._groups.rolled_back()
            self._accounts.rolled_back()
            raise
        self._groups.committed()
        self._accounts.committed()
        self._streams.remember(streams)
        self._people.remember(people)
        return outcomes


def _users(items: Sequence[InboundEvent]) -> dict[UserKey, str]:
    users: dict[UserKey, str] = {}
    for item in items:
        platform = item.stream.platform
        if isinstance(item, InboundMessage):
            # The platform-wide nickname; a group card is per group and a poke carries none.
            key = UserKey(platform, item.sender.user_id)
            if item.sender.nickname or key not in users:
                users[key] = item.sender.nickname
        elif isinstance(item, Recall):
            users.setdefault(UserKey(platform, item.operator_id), "")
        elif isinstance(item, GroupNotice):
            if _names_someone(item.user_id):
                users.setdefault(UserKey(platform, item.user_id), "")
        elif isinstance(item, MemberProfile):
            key = UserKey(platform, item.user_id)
            if item.nickname or key not in users:
                users[key] = item.nickname
        elif isinstance(item, ForwardContent):
            continue
        else:
            users.setdefault(UserKey(platform, item.user_id), "")
    return users


def _copy_of(first: dict[str, Any], row: dict[str, Any]) -> bool:
    """Another account's delivery of the same message, earlier in the same batch."""
    apart = abs((row["time"] - first["time"]).total_seconds())
    seqs = {first["seq_key"], row["seq_key"]} - {None}
    return first["account"] != row["account"] and apart <= COPY_WINDOW_S and len(seqs) <= 1


def _names_someone(user_id: str) -> bool:
    return user_id not in ("", "0")


class _Batch:
    """One transaction's worth of rows: messages first, then notices, then the ledger."""

    def __init__(
        self,
        conn: AsyncConnection,
        now: datetime,
        streams: dict[Any, int],
        people: dict[UserKey, KnownUser],
        groups: GroupDirectory,
        accounts: GroupAccounts,
    ) -> None:
        self._conn = conn
        self._groups = groups
        self._accounts = accounts
        self._now = now
        self._streams = streams
        self._people = people
        self.stored_by: str | None = None
        self._events: list[dict[str, Any]] = []
        self._inserted: set[tuple[int, str]] = set()
        self._copies: set[tuple[int, str]] = set()
        self._bot_messages: set[int | None] = set()

    async def apply(self, items: Sequence[InboundEvent]) -> list[WriteOutcome]:
        for item in items:
            if item.stream.kind is StreamKind.GROUP:
                await self._accounts.saw(
                    self._conn, self._streams[item.stream], item.stream.self_id, self._now
                )
        messages = [i for i in items if isinstance(i, InboundMessage)]
        written = await self._insert_messages(messages)
        await self._groups.record_messages(
            self._conn,
            (
                (m, self._streams[m.stream], self._person(m.stream.platform, m.sender.user_id))
                for m in messages
            ),
            self._now,
        )
        outcomes: list[WriteOutcome] = []
        seen: set[tuple[int, str]] = set()
        for item in items:
            if isinstance(item, InboundMessage):
                outcomes.append(self._message_outcome(item, written, seen))
            elif isinstance(item, Recall):
                outcomes.append(await self._recall(item))
            elif isinstance(item, GroupNotice):
                outcomes.append(await self._group_notice(item))
            elif isinstance(item, MemberProfile):
                outcomes.append(await self._member_profile(item))
            elif isinstance(item, ForwardContent):
                stream_id = self._streams[item.stream]
                message_id = await fill_in_forward(self._conn, stream_id, item)
                outcomes.append(NoticeWritten(stream_id, None, message_id))
            else:
                outcomes.append(await self._member_change(item))
        if self._events:
            await self._conn.execute(insert(Event), self._events)
        return outcomes

    def _person(self, platform: str, user_id: str) -> int:
        return self._people[UserKey(platform, user_id)].person_id

    async def _insert_messages(self, messages: list[InboundMessage]) -> dict[tuple[int, str], int]:
        rows: dict[tuple[int, str], dict[str, Any]] = {}
        for msg in messages:
            key = (self._streams[msg.stream], msg.platform_message_id)
            rows.setdefault(key, self._message_row(msg, key[0]) | {"stored_by": self.stored_by})
        if not rows:
            return {}
        await self._stored_quotes(rows)
        copies = await self._copies_by_content(rows)
        fresh = [row for key, row in rows.items() if key not in copies]
        inserted: dict[tuple[int, str], int] = {}
        if fresh:
            stmt = insert_ignoring_conflicts(self._conn, Message.__table__)  # type: ignore[arg-type]
            result = await self._conn.execute(
                stmt.returning(Message.id, Message.stream_id, Message.platform_message_id), fresh
            )
            inserted = {(r.stream_id, r.platform_message_id): r.id for r in result}
        self._inserted = set(inserted)
        existing = rows.keys() - inserted.keys() - copies.keys()
        if existing:
            found = await self._existing_ids(existing)
            inserted.update(found)
            for key, message_id in found.items():
                if rows[key]["seq_key"] is not None:  # the echo of a send stored from its receipt
                    await learn_sequence(self._conn, message_id, key[0], rows[key]["seq_key"])
        copies.update(await self._copies_by_seq(rows, rows.keys() - inserted.keys()))
        return inserted | await self._kept_copies(rows, copies, inserted)

    async def _stored_quotes(self, rows: dict[tuple[int, str], dict[str, Any]]) -> None:
        """In a group several accounts see, a quote names its message by the id it is stored
        under, whichever account's id it came with."""
        for key, row in rows.items():
            if row["reply_to"] is not None and self._accounts.several(key[0]):
                stored = await stored_id_of(self._conn, key[0], row["reply_to"])
                if stored is not None:
                    row["reply_to"] = stored

    async def _copies_by_content(
        self, rows: dict[tuple[int, str], dict[str, Any]]
    ) -> dict[tuple[int, str], int | tuple[int, str]]:
        """In a group several accounts see: messages another account already delivered, by
        sender, text and time (shared_chats.py): the stored message's id, or the key of its
        first copy earlier in this batch."""
        copies: dict[tuple[int, str], int | tuple[int, str]] = {}
        firsts: dict[tuple[int, int, str], tuple[int, str]] = {}
        for key, row in rows.items():
            if not self._accounts.several(key[0]):
                continue
            same = (key[0], row["sender_person_id"], row["text"])
            first = firsts.get(same)
            if first is not None and _copy_of(rows[first], row):
                copies[key] = first
                continue
            found = await copy_by_content(self._conn, row)
            if found is not None:
                copies[key] = found
            else:
                firsts.setdefault(same, key)
        return copies

    async def _copies_by_seq(
        self, rows: dict[tuple[int, str], dict[str, Any]], keys: set[tuple[int, str]]
    ) -> dict[tuple[int, str], int | tuple[int, str]]:
        """Messages another account's copy of which is stored under QQ's sequence number."""
        wanted = {key: (key[0], rows[key]["seq_key"]) for key in keys if rows[key]["seq_key"]}
        found = await copies_by_seq(self._conn, wanted.values())
        return {key: found[seq] for key, seq in wanted.items() if seq in found}

    async def _kept_copies(
        self,
        rows: dict[tuple[int, str], dict[str, Any]],
        copies: dict[tuple[int, str], int | tuple[int, str]],
        inserted: dict[tuple[int, str], int],
    ) -> dict[tuple[int, str], int]:
        """Each copy's stored message, its account's own id for it kept beside it."""
        resolved = {
            key: found if isinstance(found, int) else inserted.get(found)
            for key, found in copies.items()
        }
        ids = {key: mid for key, mid in resolved.items() if mid is not None}
        await keep_copies(
            self._conn, (CopyOf(mid, rows[key]["account"], key[1]) for key, mid in ids.items())
        )
        self._copies = set(ids)
        return ids

    async def _existing_ids(self, keys: set[tuple[int, str]]) -> dict[tuple[int, str], int]:
        result = await self._conn.execute(
            select(Message.id, Message.stream_id, Message.platform_message_id).where(
                Message.platform_message_id.in_({pid for _, pid in keys})
            )
        )
        return {
            (r.stream_id, r.platform_message_id): r.id
            for r in result
            if (r.stream_id, r.platform_message_id) in keys
        }

    def _message_row(self, msg: InboundMessage, stream_id: int) -> dict[str, Any]:
        return {
            "stream_id": stream_id,
            "sender_person_id": self._person(msg.stream.platform, msg.sender.user_id),
            "platform_message_id": msg.platform_message_id,
            "time": msg.time,
            "stored_at": self._now,
            "text": msg.text,
            "segments": [seg.to_json() for seg in msg.segments],
            "reply_to": msg.reply_to,
            "mentions": list(msg.mentions),
            "mentions_all": msg.mentions_all,
            "is_poke": msg.is_poke,
            "from_bot": msg.from_bot,
            "origin": msg.origin,
            "recalled": False,
            "suppressed": False,
            "truncated": msg.truncated,
            "account": msg.stream.self_id,
            "seq_key": f"s:{msg.qq_seq}" if msg.qq_seq else None,
        }

    def _message_outcome(
        self,
        msg: InboundMessage,
        written: dict[tuple[int, str], int],
        seen: set[tuple[int, str]],
    ) -> MessageWritten:
        stream_id = self._streams[msg.stream]
        person_id = self._person(msg.stream.platform, msg.sender.user_id)
        key = (stream_id, msg.platform_message_id)
        message_id = written.get(key)
        if key in self._inserted and key not in seen:
            seen.add(key)
            if not msg.from_bot:
                self._event(EventKind.INBOUND, stream_id, person_id, message_id)
            return MessageWritten(message_id, stream_id, person_id, duplicate=False)
        # Already stored (earlier, or earlier in this very batch): a duplicate delivery, or
        # another account's copy of the same message.
        copy = key in self._copies
        self._event(
            EventKind.INBOUND_DUPLICATE,
            stream_id,
            person_id,
            message_id,
            reason="copy" if copy else "",
            payload={"platform_message_id": msg.platform_message_id,
                     "account": msg.stream.self_id},
        )
        return MessageWritten(message_id or 0, stream_id, person_id, duplicate=True, copy=copy)

    async def _recall(self, recall: Recall) -> NoticeWritten:
        stream_id = self._streams[recall.stream]
        operator = self._person(recall.stream.platform, recall.operator_id)
        result = await self._conn.execute(
            update(Message)
            .where(
                Message.stream_id == stream_id,
                Message.platform_message_id == recall.platform_message_id,
            )
            .values(recalled=True)
            .returning(Message.id)
        )
        message_id = result.scalar_one_or_none()
        if message_id is None:  # named by another account's id for it
            found = await message_by_copy(self._conn, stream_id, recall.platform_message_id)
            if found is not None:
                message_id = found[0]
                await self._conn.execute(
                    update(Message).where(Message.id == message_id).values(recalled=True)
                )
        self._event(
            EventKind.MESSAGE_RECALLED,
            stream_id,
            operator,
            message_id,
            reason="" if message_id is not None else "not_in_timeline",
            payload={"platform_message_id": recall.platform_message_id},
        )
        return NoticeWritten(stream_id, operator, message_id)

    async def _member_change(self, change: MemberChange) -> NoticeWritten:
        stream_id = self._streams[change.stream]
        person_id = self._person(change.stream.platform, change.user_id)
        account = change.stream.self_id
        group = change.stream.kind is StreamKind.GROUP
        ours = change.user_id == account or self._accounts.is_present(stream_id, change.user_id)
        if group and not change.joined and ours:
            await self._accounts.left(self._conn, stream_id, change.user_id, self._now)
        event = {
            "kind": EventKind.MEMBER_JOINED if change.joined else EventKind.MEMBER_LEFT,
            "turn_id": None,
            "stream_id": stream_id,
            "person_id": person_id,
            "message_id": None,
            "reason": change.sub_type,
            "payload": {"user_id": change.user_id, "operator_id": change.operator_id,
                        "account": account},
            "created_at": self._now,
        }
        several = group and self._accounts.several(stream_id)
        if several and await notice_seen(self._conn, self._events, event):
            return NoticeWritten(stream_id, person_id, duplicate=True)
        self._events.append(event)
        return NoticeWritten(stream_id, person_id)

    async def _group_notice(self, notice: GroupNotice) -> NoticeWritten:
        stream_id = self._streams[notice.stream]
        platform = notice.stream.platform
        person_id = (
            self._person(platform, notice.user_id) if _names_someone(notice.user_id) else None
        )
        message_id = await self._message_by_platform_id(stream_id, notice.message_id)
        if notice.kind in _BOT_MESSAGE_ONLY and message_id not in self._bot_messages:
            return NoticeWritten(stream_id, person_id, message_id)  # likes on others' messages
        await self._groups.apply_notice(self._conn, notice, stream_id, person_id, self._now)
        payload: dict[str, Any] = {"user_id": notice.user_id}
        if notice.operator_id:
            payload["operator_id"] = notice.operator_id
        if notice.value:
            payload["value"] = notice.value
        if notice.message_id:
            payload["platform_message_id"] = notice.message_id
        self._event(
            EventKind.GROUP_NOTICE,
            stream_id,
            person_id,
            message_id,
            reason=notice.kind.value,
            payload=payload,
        )
        return NoticeWritten(stream_id, person_id, message_id)

    async def _member_profile(self, profile: MemberProfile) -> NoticeWritten:
        stream_id = self._streams[profile.stream]
        person_id = self._person(profile.stream.platform, profile.user_id)
        await self._groups.record_profile(
            self._conn, stream_id, person_id, profile.card, profile.role, self._now
        )
        return NoticeWritten(stream_id, person_id)

    async def _message_by_platform_id(self, stream_id: int, platform_id: str | None) -> int | None:
        if platform_id is None:
            return None
        row = (
            await self._conn.execute(
                select(Message.id, Message.from_bot).where(
                    Message.stream_id == stream_id, Message.platform_message_id == platform_id
                )
            )
        ).first()
        found = (int(row.id), bool(row.from_bot)) if row is not None else None
        if found is None:  # named by another account's id for it
            copy = await message_by_copy(self._conn, stream_id, platform_id)
            found = None if copy is None else (copy[0], copy[1])
        if found is None:
            return None
        if found[1]:
            self._bot_messages.add(found[0])
        return found[0]

    def _event(
        self,
        kind: EventKind,
        stream_id: int,
        person_id: int | None,
        message_id: int | None,
        *,
        reason: str = "",
        payload: dict[str, Any] | None = None,
    ) -> None:
        self._events.append(
            {
                "kind": kind,
                "turn_id": None,
                "stream_id": stream_id,
                "person_id": person_id,
                "message_id": message_id,
                "reason": reason,
                "payload": payload or {},
                "created_at": self._now,
            }
        )
