"""The bot's own style, as persona keeps it: its mood, its expression fingerprint, and each
chat's current session (its character is the core's, pallas/store/character.py)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select, union
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.product.persona.tables import BotMood, BotStyle, ChatSession
from pallas.store.database import Database
from pallas.store.models import Identity, Message, Stream, StreamAccount
from pallas.store.origins import spoken
from pallas.store.sql import upsert


@dataclass(frozen=True)
class StoredSession:
    started_at: datetime
    tone: str
    resumption: str


class BotStyleStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._writes = Database.of(engine).writes()

    async def mood(self, self_id: str) -> tuple[float, datetime | None]:
        query = select(BotMood.valence, BotMood.updated_at).where(BotMood.self_id == self_id)
        async with self._engine.connect() as conn:
            row = (await conn.execute(query)).first()
        return (float(row.valence), row.updated_at) if row else (0.0, None)

    async def set_mood(self, self_id: str, valence: float, now: datetime) -> None:
        values = {"self_id": self_id, "valence": valence, "updated_at": now}
        async with self._writes.begin() as conn:
            await conn.execute(upsert(conn, BotMood.__table__, ["self_id"], values))

    async def phrases(self, self_id: str) -> list[str]:
        query = select(BotStyle.phrases).where(BotStyle.self_id == self_id)
        async with self._engine.connect() as conn:
            return list(await conn.scalar(query) or [])

    async def set_phrases(self, self_id: str, phrases: list[str], now: datetime) -> None:
        values = {"self_id": self_id, "phrases": phrases, "updated_at": now}
        async with self._writes.begin() as conn:
            await conn.execute(upsert(conn, BotStyle.__table__, ["self_id"], values))

    async def session(self, stream_id: int) -> StoredSession | None:
        query = select(ChatSession.started_at, ChatSession.tone, ChatSession.resumption).where(
            ChatSession.stream_id == stream_id
        )
        async with self._engine.connect() as conn:
            row = (await conn.execute(query)).first()
        return StoredSession(*row) if row else None

    async def set_session(self, stream_id: int, session: StoredSession) -> None:
        values = {"stream_id": stream_id, **session.__dict__}
        async with self._writes.begin() as conn:
            await conn.execute(upsert(conn, ChatSession.__table__, ["stream_id"], values))

    async def last_seen_before(self, stream_id: int, message_id: int) -> datetime | None:
        """When the chat's previous message (before this one) was sent."""
        query = (
            select(Message.time)
            .where(Message.stream_id == stream_id, Message.id < message_id)
            .order_by(Message.id.desc())
            .limit(1)
        )
        async with self._engine.connect() as conn:
            return await conn.scalar(query)


@dataclass(frozen=True)
class ReplyWithAnswers:
    text: str
    answers: tuple[str, ...]
    quoted: bool


async def accounts(engine: AsyncEngine) -> list[str]:
    """Every bot account that has a chat (a group shared with other accounts included)."""
    query = union(select(Stream.self_id), select(StreamAccount.self_id))
    async with engine.connect() as conn:
        return sorted(set(await conn.scalars(query)))


async def replies_with_answers(
    engine: AsyncEngine, self_id: str, limit: int, answers: int
) -> list[ReplyWithAnswers]:
    """The account's newest `limit` messages, each with the next `answers` messages of others
    in its chat and whether one of those quoted it."""
    # Said by this account, whichever of the bot's accounts delivered it (a shared group).
    speaker = select(Identity.person_id).where(Identity.user_id == self_id)
    own = (
        select(Message.id, Message.stream_id, Message.platform_message_id, Message.text)
        .where(Message.sender_person_id.in_(speaker))
        .where(Message.from_bot.is_(True), Message.is_poke.is_(False))
        .where(spoken(Message.origin))  # not a command's answer, a repeat, a welcome
        .order_by(Message.id.desc())
        .limit(limit)
    )
    found = []
    async with engine.connect() as conn:
        for mid, stream_id, platform_id, text in (await conn.execute(own)).all():
            after = (
                select(Message.text, Message.reply_to)
                .where(Message.stream_id == stream_id, Message.id > mid)
                .where(Message.from_bot.is_(False))
                .order_by(Message.id)
                .limit(answers)
            )
            rows = (await conn.execute(after)).all()
            quoted = any(row.reply_to == platform_id for row in rows)
            found.append(ReplyWithAnswers(text, tuple(row.text for row in rows), quoted))
    return found
