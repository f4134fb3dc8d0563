"""Stage-list benchmark: what the stages before the gate add per message.

Builds an in-process `Runtime` on a fresh temporary SQLite data dir, registers the responder
stages as the plugin packages do, and times `StageList.on_message` per message for the same
group chatter (distinct lines from many members in many groups, nobody blocked, no owner, no
poke, no repeat) twice: with the gate alone (today's path before this list existed: ingress
then the gate), and with the whole declared order (silence, commands, poke_back, notices,
repeat, gate). The gate is replaced by a no-op stage in both runs, so what is timed is exactly
what the stages in front of it cost. Runs alternate A/B `--rounds` times; medians are reported.

Run from the repository root: `.venv/bin/python bench/stages_bench.py [--messages N]
[--rounds R]`. Target: the added cost <= 20 us per message at p50 (printed PASS or MISS).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from loguru import logger  # noqa: E402

from bench.loops import add_loop_option, pick_runner  # noqa: E402
from bench.machine import machine_line  # noqa: E402
from bench.stats import percentile  # noqa: E402
from pallas.app import STAGE_ORDER, Runtime  # noqa: E402
from pallas.config import load_settings  # noqa: E402
from pallas.core.inbound import (  # noqa: E402
    InboundMessage,
    Segment,
    SegmentKind,
    Sender,
    StreamKey,
    StreamKind,
)
from pallas.product.conversation.ingress import CONTINUE, StageResult, StoredMessage  # noqa: E402
from pallas.product.conversation.stages import StageList  # noqa: E402
from pallas.product.deterministic.extension import EXTENSION as RESPONDERS  # noqa: E402

TARGET_US = 20.0
STREAMS = 20
PEOPLE = 50


class NoGate:
    name = "gate"

    async def on_message(self, stored: StoredMessage) -> StageResult:
        return CONTINUE

    async def on_own_message(self, stored: StoredMessage) -> None:
        return None


def chatter(count: int, offset: int) -> list[StoredMessage]:
    out = []
    for i in range(count):
        stream = StreamKey("qq", "10000", StreamKind.GROUP, str(9000 + i % STREAMS))
        text = f"随便聊聊 第{offset + i}句"
        msg = InboundMessage(
            stream=stream,
            sender=Sender(user_id=str(20000 + i % PEOPLE)),
            platform_message_id=str(offset + i),
            time=datetime.now(UTC),
            segments=(Segment(SegmentKind.TEXT, text=text),),
            text=text,
        )
        out.append(StoredMessage(offset + i, 1 + i % STREAMS, 1 + i % PEOPLE, msg))
    return out


async def timed(stages: StageList, messages: list[StoredMessage]) -> list[float]:
    samples = []
    clock = time.perf_counter_ns
    for stored in messages:
        start = clock()
        await stages.on_message(stored)
        samples.append((clock() - start) / 1000)
    return sorted(samples)


async def run(messages: int, rounds: int, loop: str) -> None:
    print(machine_line("at start", loop))
    with tempfile.TemporaryDirectory() as tmp:
        settings = load_settings(env_file=None, pallas_data_dir=Path(tmp))
        runtime = Runtime.build(settings, features=(RESPONDERS,))
        await runtime.start()
        try:
            gate_only = StageList([NoGate()], runtime.recorders.ledger, NoGate())
            full = StageList([NoGate()], runtime.recorders.ledger, NoGate(), STAGE_ORDER)
            named = {s.name: s for s in runtime.conversation.stages.stages}
            for name in ("silence", "commands", "repeat", "poke_back", "notices"):
                full.register(named[name])
            print(f"order: {' -> '.join(full.order)}")
            await timed(full, chatter(STREAMS * 2, 10_000_000))  # warm: each group seen once
            a_p50, b_p50, b_p99, a_p99 = [], [], [], []
            for r in range(rounds):
                batch = chatter(messages, r * messages)
                gc.collect()
                first, second = (gate_only, full) if r % 2 == 0 else (full, gate_only)
                one = await timed(first, batch)
                two = await timed(second, chatter(messages, (r + rounds) * messages))
                base, whole = (one, two) if first is gate_only else (two, one)
                a_p50.append(percentile(base, 50))
                a_p99.append(percentile(base, 99))
                b_p50.append(percentile(whole, 50))
                b_p99.append(percentile(whole, 99))
        finally:
            await runtime.stop()
    added50 = statistics.median(b_p50) - statistics.median(a_p50)
    added99 = statistics.median(b_p99) - statistics.median(a_p99)
    print(f"messages per round: {messages}, rounds: {rounds} (medians of the rounds)")
    for label, p50s, p99s in (("gate alone", a_p50, a_p99), ("whole list", b_p50, b_p99)):
        p50, p99 = statistics.median(p50s), statistics.median(p99s)
        print(f"{label:<11} p50 {p50:7.2f} us  p99 {p99:7.2f} us")
    verdict = "PASS" if added50 <= TARGET_US else "MISS"
    print(f"added per message: p50 {added50:.2f} us, p99 {added99:.2f} us")
    print(f"target: added p50 <= {TARGET_US:.0f} us: {verdict}")
    print(machine_line("at end", loop))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    add_loop_option(parser)
    args = parser.parse_args()
    logger.remove()
    label, runner = pick_runner(args.loop)
    runner(run(args.messages, args.rounds, label))


if __name__ == "__main__":
    main()
