"""The bot's character per account, as stored state: its name, description and style,
seeded from config/agent.yml on first use, then edited (/人设, the console's `character`
section). Read every turn, so kept once read; one store for the whole process."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.store.database import Database
from pallas.store.models import BotCharacter
from pallas.store.sql import insert_ignoring_conflicts, upsert

CHARACTER_FIELDS = ("name", "description", "style")


@dataclass(frozen=True)
class StoredCharacter:
    name: str
    description: str
    style: str


class CharacterStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._writes = Database.of(engine).writes()
        self._characters: dict[str, StoredCharacter] = {}  # read every turn: kept once read

    async def character(
        self, self_id: str, seed: StoredCharacter, now: datetime
    ) -> StoredCharacter:
        """The account's character; the first time, the seed (from the agent file) is stored."""
        if self_id in self._characters:
            return self._characters[self_id]
        values = {"self_id": self_id, **seed.__dict__, "updated_at": now}
        async with self._writes.begin() as conn:
            table = BotCharacter.__table__
            await conn.execute(insert_ignoring_conflicts(conn, table).values(values))
            row = (
                await conn.execute(
                    select(BotCharacter.name, BotCharacter.description, BotCharacter.style).where(
                        BotCharacter.self_id == self_id
                    )
                )
            ).one()
        self._characters[self_id] = StoredCharacter(*row)
        return self._characters[self_id]

    async def edit(
        self, self_id: str, seed: StoredCharacter, field: str, value: str, now: datetime
    ) -> StoredCharacter:
        if field not in CHARACTER_FIELDS:
            raise ValueError(f"no character field {field!r}")
        current = await self.character(self_id, seed, now)
        changed = StoredCharacter(**{**current.__dict__, field: value})
        values: dict[str, Any] = {"self_id": self_id, **changed.__dict__, "updated_at": now}
        async with self._writes.begin() as conn:
            await conn.execute(upsert(conn, BotCharacter.__table__, ["self_id"], values))
        self._characters[self_id] = changed
        return changed
