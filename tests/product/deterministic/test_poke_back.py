"""The poke-back decision: who gets poked back, and the two limits."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from pallas.product.deterministic.poke_back import (
    PastPoke,
    PokeLimits,
    PokeRequest,
    PokeVerdict,
    decide_poke_back,
)

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
BOT = "10000"
ME = PokeRequest(poker="42", target=BOT, self_id=BOT)


def ago(seconds: float, target: str = "42") -> PastPoke:
    return PastPoke(target, NOW - timedelta(seconds=seconds))


CASES: list[tuple[str, PokeRequest, list[PastPoke], PokeVerdict]] = [
    ("first poke", ME, [], PokeVerdict.POKE_BACK),
    ("someone else was poked", PokeRequest("42", "777", BOT), [], PokeVerdict.NOT_FOR_ME),
    ("the bot poked itself", PokeRequest(BOT, BOT, BOT), [], PokeVerdict.NOT_FOR_ME),
    ("same person within a minute", ME, [ago(59)], PokeVerdict.PERSON_COOLDOWN),
    ("same person a minute later", ME, [ago(60)], PokeVerdict.POKE_BACK),
    ("another person within a minute", ME, [ago(5, "43")], PokeVerdict.POKE_BACK),
    (
        "three in five minutes fill the stream",
        ME,
        [ago(10, "43"), ago(100, "44"), ago(290, "45")],
        PokeVerdict.STREAM_LIMIT,
    ),
    (
        "the oldest of three left the window",
        ME,
        [ago(10, "43"), ago(100, "44"), ago(300, "45")],
        PokeVerdict.POKE_BACK,
    ),
    (
        "an echoed record of one poke counts once",
        ME,
        [ago(10, "43"), ago(9, "43"), ago(100, "44")],
        PokeVerdict.POKE_BACK,
    ),
    (
        "two real pokes of one person count twice",
        ME,
        [ago(10, "43"), ago(80, "43"), ago(100, "44")],
        PokeVerdict.STREAM_LIMIT,
    ),
    (
        "cooldown is checked before the stream limit",
        ME,
        [ago(1), ago(2, "43"), ago(3, "44")],
        PokeVerdict.PERSON_COOLDOWN,
    ),
]


@pytest.mark.parametrize(("case", "request_", "sent", "expected"), CASES, ids=[c[0] for c in CASES])
def test_decide_poke_back(
    case: str, request_: PokeRequest, sent: list[PastPoke], expected: PokeVerdict
) -> None:
    assert decide_poke_back(request_, sent, NOW) is expected, case


def test_limits_are_parameters() -> None:
    strict = PokeLimits(person_cooldown=timedelta(minutes=10), stream_max=1)
    assert decide_poke_back(ME, [ago(120)], NOW, strict) is PokeVerdict.PERSON_COOLDOWN
    assert decide_poke_back(ME, [ago(120, "43")], NOW, strict) is PokeVerdict.STREAM_LIMIT
    assert strict.lookback == timedelta(minutes=10)
    assert PokeLimits().lookback == timedelta(minutes=5)
