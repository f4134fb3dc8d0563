"""Registry and wire names for MCP tools (pure): `mcp.<server>.<tool>`, which travels as
`mcp__<server>__<tool>` and must fit what Chat Completions accepts (`[A-Za-z0-9_-]`, at most
64 characters) and what the registry accepts (lowercase words of letters, digits and single
underscores).

A name is lowercased and everything else becomes `_`; a name that had to be cut, and every
name that two tools of one server would come to share, ends in `_` and six hex digits of
its original's SHA-1, so it stays the same across restarts and reorderings (docs/mcp.md).
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable

from pallas.product.llm.tools.registry import to_wire

WIRE_LIMIT = 64
SERVER_LIMIT = 16
PREFIX = "mcp"
_OTHER = re.compile(r"[^a-z0-9]+")


def plain(name: str) -> str:
    """Lowercase words joined by single underscores, starting with a letter."""
    words = _OTHER.sub("_", name.lower()).strip("_")
    if not words or not words[0].isalpha():
        words = f"t_{words}".rstrip("_")
    return words


def _tag(original: str) -> str:
    return hashlib.sha1(original.encode("utf-8")).hexdigest()[:6]


def server_names(originals: Iterable[str]) -> dict[str, str]:
    """Each configured server name's plain name; a name with no letters of its own (天气),
    too long, or taken already gets its tag."""
    names: dict[str, str] = {}
    for original in originals:
        found = plain(original)
        if found == "t" or len(found) > SERVER_LIMIT or found in names.values():
            found = f"{found[: SERVER_LIMIT - 7].rstrip('_')}_{_tag(original)}"
        names[original] = found
    return names


def tool_names(server: str, originals: Iterable[str]) -> dict[str, str]:
    """Each original tool name's registry name under the server (its plain server name).

    Whatever order the server lists them in, a tool gets the same name: every tool of a
    group that would share one plain name is tagged, as is every name that must be cut."""
    room = WIRE_LIMIT - len(to_wire(f"{PREFIX}.{server}."))
    unique = list(dict.fromkeys(originals))
    shared = Counter(plain(original) for original in unique)
    names = {}
    for original in unique:
        found = plain(original)
        if len(found) > room or shared[found] > 1:
            found = f"{found[: room - 7].rstrip('_')}_{_tag(original)}"
        names[original] = f"{PREFIX}.{server}.{found}"
    return names
