"""A rough token count for services that report no usage.

Costs must still add up when a model ignores `stream_options`: ASCII text runs about four
characters per token, CJK and other scripts about one. It errs high, never free.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def estimate_tokens(text: str) -> int:
    if not text:
        return 0
    ascii_chars = sum(1 for ch in text if ord(ch) < 128)
    return (ascii_chars + 3) // 4 + (len(text) - ascii_chars)


def message_text(messages: Iterable[Mapping[str, Any]]) -> str:
    """The text a chat request carries (images and audio are not counted)."""
    parts: list[str] = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(
                str(part.get("text", ""))
                for part in content
                if isinstance(part, Mapping) and part.get("type") == "text"
            )
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            parts.append(f"{function.get('name', '')} {function.get('arguments', '')}")
    return "\n".join(parts)
