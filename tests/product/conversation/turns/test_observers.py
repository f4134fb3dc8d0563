"""After-turn observers hear of every ending, off the turn's path, failures contained."""

from __future__ import annotations

import asyncio

from loguru import logger

from pallas.app import Runtime
from pallas.product.conversation.turns.observers import TurnEnded, TurnEnding
from pallas.product.conversation.turns.turn import Turn, TurnDecision
from tests.product.conversation.turns.test_kernel import Recorder, say, settle
from tests.product.conversation.turns.test_kernel import recorder as recorder
from tests.product.conversation.turns.test_kernel import runtime as runtime
from tests.support.inbound import group, message, private
from tests.support.waiting import until


class Noting:
    name = "noting"

    def __init__(self) -> None:
        self.endings: list[TurnEnded] = []

    async def turn_ended(self, ended: TurnEnded) -> None:
        self.endings.append(ended)


class Stuck:
    """Never finishes until released: the turns after it must not wait for it."""

    name = "stuck"

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.heard = 0

    async def turn_ended(self, ended: TurnEnded) -> None:
        self.heard += 1
        await self.release.wait()


class Broken:
    name = "broken"

    async def turn_ended(self, ended: TurnEnded) -> None:
        raise RuntimeError("observer exploded")


def decide(turn: Turn) -> TurnDecision:
    if "失败" in turn.text:
        raise RuntimeError("handler exploded")
    return TurnDecision.SILENT if "安静" in turn.text else TurnDecision.DONE


async def test_every_ending_is_told_to_every_observer_without_holding_the_turns(
    runtime: Runtime, recorder: Recorder
) -> None:
    noting, stuck = Noting(), Stuck()
    for observer in (stuck, Broken(), noting):
        runtime.conversation.runner.observers.register(observer)
    recorder.decide = decide
    lines: list[str] = []
    sink = logger.add(lines.append, level="ERROR", format="{message}")
    try:
        done = await say(runtime, message("在吗", stream=private("1")))
        silent = await say(runtime, message("安静点", stream=private("2")))
        failed = await say(runtime, message("失败吧", stream=private("3")))
        await settle(runtime)

        def all_told() -> bool:  # each observer is told in a task of its own, after the turn
            broken = sum("after-turn observer broken failed" in line for line in lines)
            return stuck.heard >= 3 and len(noting.endings) >= 3 and broken >= 3

        await until(all_told)
    finally:
        logger.remove(sink)
    # All three turns ran and were told while the stuck observer still holds the first one.
    assert len(recorder.turns) == 3 and stuck.heard == 3 and not stuck.release.is_set()
    told = sorted((e.message_ids, e.ending) for e in noting.endings)
    assert told == [
        ((done,), TurnEnding.DONE),
        ((silent,), TurnEnding.SILENT),
        ((failed,), TurnEnding.FAILED),
    ]
    assert len({e.turn_id for e in noting.endings}) == 3
    assert sum("after-turn observer broken failed" in line for line in lines) == 3
    stuck.release.set()
    await runtime.conversation.runner.observers.drain()


async def test_a_message_the_gate_drops_starts_no_turn_and_tells_nobody(
    runtime: Runtime, recorder: Recorder
) -> None:
    noting = Noting()
    runtime.conversation.runner.observers.register(noting)
    await say(runtime, message("今天吃什么", stream=group("g1")))  # dropped by the gate itself
    await settle(runtime)
    assert noting.endings == []  # no turn, nothing ended
