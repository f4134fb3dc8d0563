"""A corpus of OneBot v11 event frames shaped exactly as NapCat builds them.

Each JSON file in ``tests/fixtures/napcat`` holds one frame: ``follows`` names the NapCat
source file(s) (under ``packages/napcat-onebot``) whose converters and event classes the
frame was read from, ``about`` says in one sentence what it is, and ``frame`` is the complete
event as NapCat sends it over the reverse WebSocket. File names start with the family:
``message_``, ``segment_``, ``notice_``, ``meta_`` or ``request_``.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

CORPUS_DIR = Path(__file__).resolve().parent.parent / "fixtures" / "napcat"


@dataclass(frozen=True)
class CorpusFrame:
    """One fixture file: its stem, the NapCat source it follows, a sentence, and the frame."""

    name: str
    follows: str
    about: str
    frame: dict[str, Any]


@cache
def _read_all() -> tuple[CorpusFrame, ...]:
    frames: list[CorpusFrame] = []
    for path in sorted(CORPUS_DIR.glob("*.json"), key=lambda p: p.name):
        body: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        frames.append(
            CorpusFrame(
                name=path.stem,
                follows=str(body["follows"]),
                about=str(body["about"]),
                frame=body["frame"],
            )
        )
    return tuple(frames)


def load_corpus(prefix: str = "") -> list[CorpusFrame]:
    """Every corpus file sorted by name, optionally only those whose stem starts with ``prefix``.

    The frames are deep copies, so a test may change them freely.
    """
    return [
        CorpusFrame(item.name, item.follows, item.about, copy.deepcopy(item.frame))
        for item in _read_all()
        if item.name.startswith(prefix)
    ]


def corpus_frame(name: str) -> dict[str, Any]:
    """A deep copy of the frame in the file whose stem is ``name``; ``KeyError`` if absent."""
    for item in _read_all():
        if item.name == name:
            return copy.deepcopy(item.frame)
    raise KeyError(f"no NapCat corpus frame named {name!r} in {CORPUS_DIR}")
