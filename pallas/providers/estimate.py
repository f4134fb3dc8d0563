"""A rough token count for services that report no usage.

Costs must still add up when a model ignores `stream_options`: ASCII text runs about four
characters per token, CJK and other scripts about one. It errs high, never free.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

# An image costs what its tiles cost, which a count of characters cannot tell. OpenAI's rule
# (85 base + 170 per 512-pixel tile) gives 765 for a picture scaled to 768 px on its short
# side, the common case at "auto" detail; the 85 of a low-detail image would err low.
IMAGE_TOKENS = 765


def estimate_tokens(text: str) -> int:
    if not text:
        return 0
    ascii_chars = sum(1 for ch in text if ord(ch) < 128)
    return (ascii_chars + 3) // 4 + (len(text) - ascii_chars)


def message_tokens(messages: Iterable[Mapping[str, Any]]) -> int:
    """The estimated prompt size of chat messages, images included."""
    listed = list(messages)  # read twice below
    return estimate_tokens(message_text(listed)) + IMAGE_TOKENS * image_count(listed)


def image_count(messages: Iterable[Mapping[str, Any]]) -> int:
    count = 0
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            count += sum(
                1
                for part in content
                if isinstance(part, Mapping) and part.get("type") == "image_url"
            )
    return count


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
