"""The bot's character per account in the store, on both backends: seeded once, then edited,
and what was edited survives a restart."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.store.character import CharacterStore, StoredCharacter

T0 = datetime(2026, 12, 2, 4, 0, tzinfo=UTC)
SEED = StoredCharacter("牛牛", "老成员", "说话简短")


async def test_the_character_is_seeded_once_then_edited_and_survives_a_restart(
    engine: AsyncEngine,
) -> None:
    store = CharacterStore(engine)
    assert await store.character("1", SEED, T0) == SEED
    edited = await store.edit("1", SEED, "style", "带点东北味", T0)
    assert edited == StoredCharacter("牛牛", "老成员", "带点东北味")
    other_seed = StoredCharacter("别的", "别的", "别的")
    assert await CharacterStore(engine).character("1", other_seed, T0) == edited  # stored wins
    assert await store.character("2", other_seed, T0) == other_seed  # per account
    with pytest.raises(ValueError, match="no character field"):
        await store.edit("1", SEED, "age", "3", T0)
