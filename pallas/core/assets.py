"""Asset references: files the bot sends from its own data folder.

A media segment names one as `asset:<path>`, the path relative to `PALLAS_DATA_DIR/assets`
(docs/delivery.md). Only plain relative paths are references: nothing may point outside.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

ASSET_PREFIX = "asset:"
ASSETS_FOLDER = "assets"


def asset_path(reference: str) -> str | None:
    """The relative path of an `asset:` reference, or None if it is not a safe one."""
    if not reference.startswith(ASSET_PREFIX):
        return None
    relative = reference.removeprefix(ASSET_PREFIX)
    path = PurePosixPath(relative)
    if not relative or path.is_absolute() or ".." in path.parts or "\\" in relative:
        return None
    return relative


def asset_file(folder: Path, relative: str) -> Path:
    return folder.joinpath(*PurePosixPath(relative).parts)
