"""The console token: configured, or generated once and kept in the data dir."""

from __future__ import annotations

import secrets
from pathlib import Path

from loguru import logger

TOKEN_FILE = "console_token"


def ensure_console_token(configured: str, data_dir: Path) -> str:
    """Return the token in effect; generate, store and log one on the first start."""
    if configured:
        return configured
    path = data_dir / TOKEN_FILE
    if path.is_file():
        stored = path.read_text(encoding="utf-8").strip()
        if stored:
            return stored
    token = secrets.token_urlsafe(24)
    path.write_text(token + "\n", encoding="utf-8")
    path.chmod(0o600)
    logger.warning(
        "console token generated (kept in {}): {}  set PALLAS_CONSOLE_TOKEN to choose your own",
        path,
        token,
    )
    return token
