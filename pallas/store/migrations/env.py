"""Alembic environment.

At start-up the bot passes its own connection (see pallas/store/migrate.py). From the command
line (`alembic -c pallas/store/migrations/alembic.ini revision --autogenerate -m ...`) it
connects to PALLAS_DATABASE_URL, or to pallas.db in PALLAS_DATA_DIR (./data).
"""

from __future__ import annotations

import asyncio
import os

from alembic import context
from sqlalchemy import Connection

from pallas.store.engine import create_engine
from pallas.store.models import Base

target_metadata = Base.metadata


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=True,
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


async def _run_from_url(url: str) -> None:
    engine = create_engine(url)
    async with engine.begin() as conn:
        await conn.run_sync(_run)
    await engine.dispose()


given = context.config.attributes.get("connection")
if given is not None:
    _run(given)
else:
    # From the command line: the features' own tables (memory's, persona's...) join the one
    # metadata, so autogenerate sees the whole schema. Start-up needs no metadata.
    import pallas.features  # noqa: F401

    data_dir = os.environ.get("PALLAS_DATA_DIR", "data")
    default = f"sqlite+aiosqlite:///{os.path.abspath(os.path.join(data_dir, 'pallas.db'))}"
    asyncio.run(_run_from_url(os.environ.get("PALLAS_DATABASE_URL") or default))
