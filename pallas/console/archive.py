"""What `python -m pallas export` and `import` run: the configured store and data folder,
every feature's tables, one archive (export.py, restore.py)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pallas.config import Settings
from pallas.features import BUILT_IN_FEATURES
from pallas.product.extensions import enabled
from pallas.store.engine import create_engine
from pallas.store.export import export_store
from pallas.store.restore import import_store


async def archive_command(
    settings: Settings, command: str, file: Path, account_map: Mapping[str, str]
) -> str:
    """Run it; one line saying what was done."""
    chosen = enabled(BUILT_IN_FEATURES, settings)  # a configured feature's tables come too
    branches = [e.migrations for e in (*BUILT_IN_FEATURES, *chosen) if e.migrations]
    engine = create_engine(settings.database_url)
    try:
        if command == "export":
            made = await export_store(engine, settings.pallas_data_dir, file)
            verb = "exported"
        else:
            made = await import_store(engine, settings.pallas_data_dir, file,
                                      list(dict.fromkeys(branches)), account_map)  # fmt: skip
            verb = "imported"
    finally:
        await engine.dispose()
    rows = sum(made.tables.values())
    return f"{verb} {rows} rows of {len(made.tables)} tables and {len(made.files)} files: {file}"
