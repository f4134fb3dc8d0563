"""Documents into passages (pure): sections by their headings, each section's paragraphs
into chunks of at most CHUNK_CHARS, every chunk with the heading path it sits under
("嗯哼镇 › 风物 › 镇花"), so a passage can be cited by document and heading.

Text comes here as Markdown-ish lines: `#` headings (a DOCX's heading styles and a PDF's
pages are turned into them by parsing.py), blank lines between paragraphs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

CHUNK_CHARS = 500
MAX_CHUNKS = 5000  # one document: a 200-page manual fits; the rest of a dump is not indexed
_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_SENTENCE = re.compile(r"(?<=[。！？!?；;.])\s*")


@dataclass(frozen=True)
class Chunk:
    heading: str  # the heading path, " › " between levels; "" before the first heading
    text: str


def chunk_document(text: str, limit: int = CHUNK_CHARS) -> list[Chunk]:
    chunks: list[Chunk] = []
    for heading, paragraphs in _sections(text):
        chunks.extend(Chunk(heading, body) for body in _packed(paragraphs, limit))
        if len(chunks) >= MAX_CHUNKS:
            return chunks[:MAX_CHUNKS]
    return chunks


def _sections(text: str) -> list[tuple[str, list[str]]]:
    path: list[str] = []
    sections: list[tuple[str, list[str]]] = [("", [])]
    paragraph: list[str] = []

    def close() -> None:
        if paragraph:
            sections[-1][1].append(" ".join(paragraph))
            paragraph.clear()

    for line in text.splitlines():
        found = _HEADING.match(line.strip())
        if found:
            close()
            level = len(found[1])
            path[level - 1 :] = [found[2]]
            sections.append((" › ".join(path), []))
        elif line.strip():
            paragraph.append(line.strip())
        else:
            close()
    close()
    return [(heading, paragraphs) for heading, paragraphs in sections if paragraphs]


def _packed(paragraphs: list[str], limit: int) -> list[str]:
    """Paragraphs joined up to `limit` characters; a longer one cut at its sentences."""
    pieces = [piece for paragraph in paragraphs for piece in _pieces(paragraph, limit)]
    packed: list[str] = []
    for piece in pieces:
        if packed and len(packed[-1]) + 1 + len(piece) <= limit:
            packed[-1] = f"{packed[-1]}\n{piece}"
        else:
            packed.append(piece)
    return packed


def _pieces(paragraph: str, limit: int) -> list[str]:
    if len(paragraph) <= limit:
        return [paragraph]
    pieces: list[str] = []
    for sentence in (s for s in _SENTENCE.split(paragraph) if s):
        while len(sentence) > limit:  # one sentence longer than a chunk: cut by length
            pieces.append(sentence[:limit])
            sentence = sentence[limit:]
        if pieces and len(pieces[-1]) + len(sentence) <= limit:
            pieces[-1] += sentence
        else:
            pieces.append(sentence)
    return pieces
