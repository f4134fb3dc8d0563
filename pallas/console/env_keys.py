"""Which keys a `.env` may hold, and the ones it holds that nothing reads (a misspelt
`LLM_MODLE` is silently ignored by every settings loader: the doctor names it, with the
nearest key it may have meant)."""

from __future__ import annotations

import contextlib
import difflib
import re
from pathlib import Path

from dotenv import dotenv_values
from nonebot.adapters.onebot.v11.config import Config as OneBotConfig
from nonebot.config import Config as NoneBotConfig
from nonebot.config import Env as NoneBotEnv
from nonebot.drivers.fastapi import Config as FastApiConfig
from pydantic import BaseModel

from pallas.config import Settings

README = Path(__file__).resolve().parents[2] / "README.md"
# Plugins NoneBot loads read keys under these prefixes (nonebot-plugin-apscheduler).
PLUGIN_PREFIXES = ("APSCHEDULER_",)
DOCUMENTED = re.compile(r"`([A-Z][A-Z0-9_]{2,})`")


def _fields(*models: type[BaseModel]) -> set[str]:
    return {name.upper() for model in models for name in model.model_fields}


def known_keys(readme: Path = README) -> frozenset[str]:
    """The bot's settings, NoneBot's own, its adapter's and driver's, and every key README
    documents."""
    known = _fields(Settings, NoneBotConfig, NoneBotEnv, OneBotConfig, FastApiConfig)
    with contextlib.suppress(OSError):  # an installed copy may come without README
        known |= set(DOCUMENTED.findall(readme.read_text(encoding="utf-8")))
    return frozenset(known)


def unknown_keys(env_file: Path, known: frozenset[str]) -> list[tuple[str, str | None]]:
    """Each key of the file nothing reads, with the nearest known key (or None)."""
    found = []
    for key in dotenv_values(env_file):
        name = key.upper()
        if name in known or name.startswith(PLUGIN_PREFIXES):
            continue
        nearest = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.75)
        found.append((key, nearest[0] if nearest else None))
    return found
