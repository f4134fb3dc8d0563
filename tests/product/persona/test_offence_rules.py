"""The model's judgment of an attack as pure rules: what a `[冒犯:…]` counts as
(attacks.judged_attack), and to whom the persona says how to make that judgment
(offence.OffenceLines)."""

from __future__ import annotations

import itertools

import pytest

from pallas.core.inbound import StreamKey, StreamKind
from pallas.product.conversation.gate.facts import MessageFacts
from pallas.product.conversation.gate.gate import Disposition, Outcome, Reason, Signal
from pallas.product.conversation.ingress import StoredMessage
from pallas.product.conversation.turns.buffers import Batch
from pallas.product.conversation.turns.runner import build_turn
from pallas.product.conversation.turns.turn import Admitted, Occasion, Turn
from pallas.product.persona.attacks import (
    FAVOR_LOSS,
    RAGE_WEIGHT,
    Attack,
    AttackKind,
    judged_attack,
)
from pallas.product.persona.favor import Tier
from pallas.product.persona.offence import HOW_TO, OffenceLines
from tests.support.inbound import BOT_ID, group, message, private

OWNER = "7"
LINES = OffenceLines(frozenset({OWNER}))

# --- judged_attack ---------------------------------------------------------------------------


@pytest.mark.parametrize("tier", list(Tier))
def test_an_owner_is_never_judged_attacking(tier: Tier) -> None:
    assert judged_attack("骂我", owner=True, tier=tier) is None


def test_a_close_friend_s_rough_words_are_a_joke() -> None:
    assert judged_attack("骂我", owner=False, tier=Tier.CLOSE) is None


@pytest.mark.parametrize("tier", [t for t in Tier if t is not Tier.CLOSE])
def test_anyone_else_judged_attacking_counts_like_a_put_down(tier: Tier) -> None:
    found = judged_attack("阴阳怪气地嘲讽我", owner=False, tier=tier)
    assert found == Attack(AttackKind.JUDGED, 2.0, 3.0, "model: 阴阳怪气地嘲讽我")
    assert (RAGE_WEIGHT[AttackKind.JUDGED], FAVOR_LOSS[AttackKind.JUDGED]) == (
        RAGE_WEIGHT[AttackKind.PUT_DOWN],
        FAVOR_LOSS[AttackKind.PUT_DOWN],
    )


def test_the_evidence_is_the_model_s_reason_trimmed_and_capped() -> None:
    found = judged_attack("  " + "很" * 100 + "  ", owner=False, tier=Tier.NEUTRAL)
    assert found is not None
    assert found.evidence == "model: " + "很" * 40
    empty = judged_attack("", owner=False, tier=Tier.HOSTILE)
    assert empty is not None and empty.evidence == "model: "


# --- OffenceLines ----------------------------------------------------------------------------

_ids = itertools.count(100)
PRIVATE = Disposition(Outcome.FORCE, Reason.DIRECT_CONVERSATION)
MENTIONED = Disposition(Outcome.FORCE, Reason.MENTIONED, frozenset({Signal.MENTIONED}))
BY_NAME = Disposition(Outcome.DELIBERATE, Reason.ATTENTION, frozenset({Signal.CALLED_BY_NAME}))
IN_PASSING = Disposition(Outcome.DELIBERATE, Reason.ATTENTION, frozenset({Signal.NATURAL_WINDOW}))
AMBIENT = Disposition(Outcome.DELIBERATE, Reason.AMBIENT)


def stored(user_id: str, stream: StreamKey, *, from_bot: bool = False) -> StoredMessage:
    msg = message("你这算什么", stream=stream, user_id=user_id, from_bot=from_bot)
    return StoredMessage(next(_ids), 1, int(user_id), msg)


def turn_of(disposition: Disposition, *messages: StoredMessage) -> Turn:
    items = tuple(Admitted(m, MessageFacts(), disposition) for m in messages)
    private_chat = messages[0].message.stream.kind is StreamKind.PRIVATE
    return build_turn(1, Batch(1, items, may_wait=False, private=private_chat), disposition)


async def test_no_line_for_an_owner_s_batch() -> None:
    assert await LINES.lines(turn_of(PRIVATE, stored(OWNER, private(OWNER)))) == []
    chat = group("500")
    assert await LINES.lines(turn_of(MENTIONED, stored(OWNER, chat))) == []


async def test_no_line_when_an_owner_is_anywhere_in_the_batch() -> None:
    chat = group("500")
    batch = turn_of(MENTIONED, stored("42", chat), stored(OWNER, chat))
    assert await LINES.lines(batch) == []


@pytest.mark.parametrize("disposition", [IN_PASSING, AMBIENT], ids=["natural_window", "ambient"])
async def test_no_line_for_a_group_batch_that_did_not_call_the_bot(
    disposition: Disposition,
) -> None:
    assert not disposition.is_direct_call
    assert await LINES.lines(turn_of(disposition, stored("42", group("500")))) == []


@pytest.mark.parametrize("disposition", [MENTIONED, BY_NAME], ids=["mentioned", "by_name"])
async def test_one_line_for_a_group_batch_that_called_the_bot(disposition: Disposition) -> None:
    assert await LINES.lines(turn_of(disposition, stored("42", group("500")))) == [HOW_TO]


async def test_one_line_for_a_private_batch() -> None:
    assert await LINES.lines(turn_of(PRIVATE, stored("42", private("42")))) == [HOW_TO]


async def test_no_line_for_a_batch_of_only_the_bot_s_own_lines() -> None:
    mine = stored(BOT_ID, private("42"), from_bot=True)
    assert await LINES.lines(turn_of(PRIVATE, mine)) == []


async def test_no_line_in_a_turn_the_bot_started_itself() -> None:
    base = turn_of(PRIVATE, stored("42", private("42")))
    proactive = Turn(
        turn_id=2,
        stream_id=base.stream_id,
        stream=base.stream,
        messages=(),
        text="",
        facts=MessageFacts(),
        disposition=Disposition(Outcome.DELIBERATE, Reason.PROACTIVE),
        trigger=base.trigger,
        timeline_size=base.timeline_size,
        may_wait=False,
        watermark=base.watermark,
        occasion=Occasion("private_follow_up", "对方没再说话"),
    )
    assert await LINES.lines(proactive) == []


def test_the_line_names_the_marker_the_output_reads() -> None:
    assert "[冒犯:" in HOW_TO
