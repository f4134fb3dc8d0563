"""Learned lines in a real store (SQLite and PostgreSQL): counting sightings, opt-outs, the
candidates for a context, bans here and everywhere."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.product.classic.learning import Sighting
from pallas.product.classic.lines import hashed
from pallas.product.classic.store import LearnedStore, Said
from pallas.store.timeline import MessageWritten, TimelineWriter
from tests.support.inbound import group, message, recall

T0 = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
MORNING, HELLO = Said(hashed("早"), "早"), Said(hashed("早上好呀"), "早上好呀")
WORDS = [{"kind": "text", "text": "早上好呀"}]


def saw(person: int, at: datetime, stream: int = 1, answer: Said = HELLO) -> Sighting:
    return Sighting(stream, MORNING, answer, WORDS, person, at)


async def test_one_person_counts_once_a_while_and_an_opt_out_is_not_learned(
    engine: AsyncEngine,
) -> None:
    store = LearnedStore(engine)
    await store.set_opt_out(9, True, T0)
    spam = [saw(1, T0 + timedelta(seconds=s)) for s in range(200)]  # one person, 200 times
    await store.learn_many([*spam[:1], saw(9, T0)])
    await store.learn_many(spam[1:])  # a later batch: still within ten minutes
    [pair] = await store.pairs(1)
    assert (pair.count, pair.answerers) == (1, 1)
    await store.learn_many([saw(2, T0), saw(1, T0 + timedelta(minutes=11))])
    [pair] = await store.pairs(1)
    assert (pair.count, pair.answerers) == (3, 2)


async def test_candidates_here_and_elsewhere_less_the_banned(engine: AsyncEngine) -> None:
    store = LearnedStore(engine)
    other = Said(hashed("早啊"), "早啊")
    await store.learn_many([saw(1, T0), saw(2, T0), saw(3, T0, stream=2, answer=other)])
    found = {c.text: c for c in await store.candidates(1, MORNING.hash)}
    hello = found["早上好呀"]
    assert hello.here and (hello.count, hello.answerers) == (2, 2)
    assert not found["早啊"].here  # another group's: used only above its own threshold
    here = await store.pair(found["早上好呀"].pair_id)
    assert here is not None
    await store.ban(1, here, 7, T0)  # an admin's ban: this group only
    assert [c.text for c in await store.candidates(1, MORNING.hash)] == ["早啊"]
    assert "早上好呀" in [c.text for c in await store.candidates(3, MORNING.hash)]
    elsewhere = await store.pair(found["早啊"].pair_id)
    assert elsewhere is not None
    await store.ban(None, elsewhere, 7, T0)  # an owner's: everywhere
    assert await store.candidates(1, MORNING.hash) == []
    [ban_here, ban_all] = sorted(await store.bans(1), key=lambda b: b.everywhere)
    assert not ban_here.everywhere and ban_all.everywhere
    assert not await store.lift(ban_all.id, 1, owner=False)  # an admin cannot lift it
    assert await store.lift(ban_all.id, 1, owner=True)
    assert await store.context_hashes() == {MORNING.hash}


async def test_a_line_recalled_before_the_flush_teaches_nothing(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    line = message("早上好呀", stream=group("700"), user_id="5")
    said = await writer.write(line)
    assert isinstance(said, MessageWritten)
    await writer.write(recall(line.platform_message_id, stream=group("700")))
    store = LearnedStore(engine)
    kept = Sighting(1, MORNING, HELLO, WORDS, 5, T0, (0, said.message_id))
    await store.learn_many([kept, saw(6, T0)])
    [pair] = await store.pairs(1)
    assert pair.answerers == 1  # only the line not recalled
