"""Export and import time for a large store (docs/deploy.md, "Backup, restore, move").

Builds the context benchmark's timeline (1,000,000 messages over 200 groups and 5,000 people
by default, bench/context_bench.py's generator and bulk insert) in a temporary SQLite file,
then times `export_store` into a gzip'd archive, `import_store` of that archive into a fresh
SQLite file, and, with --postgres URL (an empty database), into PostgreSQL. Each import is
checked: every table's row count equals the manifest's. Prints the times, rows per second,
the archive's size and the process's peak memory.

  .venv/bin/python bench/backup_bench.py [--messages 1000000] [--postgres URL]
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import sys
import tempfile
import time
from pathlib import Path

from sqlalchemy import func, select

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pallas.features  # noqa: F401  every feature's tables on the metadata
from bench.context_bench import build
from pallas.store.engine import create_engine
from pallas.store.export import export_store
from pallas.store.restore import import_store
from pallas.store.schema_base import Base


async def counts(url: str) -> dict[str, int]:
    engine = create_engine(url)
    try:
        async with engine.connect() as conn:
            return {t.name: int((await conn.execute(select(func.count()).select_from(t)))
                                .scalar_one()) for t in Base.metadata.sorted_tables}  # fmt: skip
    finally:
        await engine.dispose()


async def timed_import(url: str, archive: Path, data_dir: Path) -> float:
    engine = create_engine(url)
    try:
        start = time.perf_counter()
        await import_store(engine, data_dir, archive)
        return time.perf_counter() - start
    finally:
        await engine.dispose()


async def main(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="pallas-backup-bench-") as scratch:
        folder = Path(scratch)
        source = folder / "source.db"
        engine = create_engine(f"sqlite+aiosqlite:///{source}")
        built = await build(engine, source, argparse.Namespace(
            messages=args.messages, streams=args.streams, people=args.people))  # fmt: skip
        print(f"built {args.messages:,} messages in {built.total_s:.1f} s "
              f"({built.db_bytes / 2**20:.0f} MiB)")  # fmt: skip
        engine = create_engine(f"sqlite+aiosqlite:///{source}")
        archive = folder / "backup.tar.gz"
        start = time.perf_counter()
        manifest = await export_store(engine, folder / "data", archive)
        export_s = time.perf_counter() - start
        await engine.dispose()
        rows = sum(manifest.tables.values())
        print(f"export: {export_s:.1f} s, {rows / export_s:,.0f} rows/s, "
              f"archive {archive.stat().st_size / 2**20:.0f} MiB")  # fmt: skip
        failures = 0
        targets = [("sqlite", f"sqlite+aiosqlite:///{folder / 'target.db'}")]
        if args.postgres:
            targets.append(("postgresql", args.postgres))
        for name, url in targets:
            seconds = await timed_import(url, archive, folder / f"data-{name}")
            same = await counts(url) == manifest.tables
            failures += not same
            print(f"import into {name}: {seconds:.1f} s, {rows / seconds:,.0f} rows/s, "
                  f"row counts {'match' if same else 'DIFFER'}")  # fmt: skip
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak memory: {peak:.0f} MiB")
    return 1 if failures else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--people", type=int, default=5_000)
    parser.add_argument("--postgres", help="an empty PostgreSQL database's URL (asyncpg)")
    sys.exit(asyncio.run(main(parser.parse_args())))
