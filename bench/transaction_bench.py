"""What one small write transaction costs on the bot's SQLite engine, two ways.

A one-row `INSERT` into `event`, then commit, `--count` times on a fresh migrated SQLite file:
first through SQLAlchemy's async engine (`engine.begin()` and `execute`, as the writers do
today), then as one call into aiosqlite's thread that runs BEGIN, the same compiled statement
and COMMIT on the thread's own connection. It prints CPU and wall time per transaction for
both: the difference is the hand-offs between the event loop and aiosqlite's thread.

Run from the repository root: `.venv/bin/python bench/transaction_bench.py [--count 300]`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from sqlalchemy import insert  # noqa: E402
from sqlalchemy.ext.asyncio import AsyncEngine  # noqa: E402

from bench.machine import machine_line  # noqa: E402
from pallas.store.engine import create_engine  # noqa: E402
from pallas.store.migrate import upgrade_to_head  # noqa: E402
from pallas.store.models import Event  # noqa: E402

ROW: dict[str, Any] = {
    "kind": "gate_dropped",
    "reason": "attention_filtered",
    "payload": {"stage": "ingress"},
    "created_at": datetime.now(UTC),
}


async def through_engine(engine: AsyncEngine, count: int) -> tuple[float, float]:
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for _ in range(count):
        async with engine.begin() as conn:
            await conn.execute(insert(Event), [ROW])
    return (time.process_time() - cpu0) / count, (time.perf_counter() - wall0) / count


async def in_one_hop(engine: AsyncEngine, count: int) -> tuple[float, float]:
    compiled = insert(Event).values(**ROW).compile(dialect=engine.dialect)
    values = compiled.construct_params()
    params = [_bound(compiled, name, values[name], engine) for name in compiled.positiontup or ()]
    async with engine.connect() as conn:
        raw = await conn.get_raw_connection()
        aio = raw.driver_connection  # the aiosqlite connection
        await aio.commit()
        db = aio._conn  # the sqlite3 connection its thread owns

        def transaction() -> None:
            db.execute("BEGIN")
            db.execute(compiled.string, params)
            db.execute("COMMIT")

        cpu0, wall0 = time.process_time(), time.perf_counter()
        for _ in range(count):
            await aio._execute(transaction)
        return (time.process_time() - cpu0) / count, (time.perf_counter() - wall0) / count


def _bound(compiled: Any, name: str, value: Any, engine: AsyncEngine) -> Any:
    processor = compiled.binds[name].type.bind_processor(engine.dialect)
    return processor(value) if processor else value


async def run(count: int) -> None:
    with tempfile.TemporaryDirectory(prefix="pallas-tx-bench-") as tmp:
        engine = create_engine(f"sqlite+aiosqlite:///{Path(tmp) / 'tx.db'}")
        await upgrade_to_head(engine)
        try:
            ways = (("SQLAlchemy async engine", through_engine), ("one hop", in_one_hop))
            for label, way in ways:
                cpu, wall = await way(engine, count)
                print(f"  {label:<26} CPU {cpu * 1000:.3f} ms, wall {wall * 1000:.3f} ms per txn")
        finally:
            await engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--count", type=int, default=300, help="transactions per way")
    args = parser.parse_args()
    print(machine_line("at start", "asyncio"))
    print(f"one-row INSERT + commit, {args.count} times each way")
    asyncio.run(run(args.count))
    print(machine_line("at end", "asyncio"))


if __name__ == "__main__":
    main()
