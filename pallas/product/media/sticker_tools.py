"""The agent's sticker tools: look through the bot's collection, and choose one for the reply.

`sticker.send` does not send by itself: it puts the choice on the turn, and the reply carries
it out (docs/media.md). A sticker is known to the model by a short id (its hash's first 8
characters), never by a file path.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pallas.product.llm.tools.base import (
    Tool,
    ToolContext,
    ToolError,
    ToolOutput,
    ToolSpec,
    ToolTag,
    Visibility,
)
from pallas.product.media.sticker_store import LibrarySticker, StickerLibrary
from pallas.product.media.stickers import CHOSEN, match_score, pick_sticker

DOMAIN = "sticker"
SHORT_ID = 8
SEARCH_LIMIT = 8
HINTS = ("表情包", "表情", "斗图", "发个图", "来张图", "贴纸")


def short_id(sticker: LibrarySticker) -> str:
    return sticker.sha256[:SHORT_ID]


def listed(sticker: LibrarySticker) -> dict[str, Any]:
    return {"id": short_id(sticker), "说明": sticker.caption, "情绪": list(sticker.emotions)}


def search_stickers(query: str, stickers: Sequence[LibrarySticker]) -> list[LibrarySticker]:
    """The best fits first; an empty query lists the most used (pure)."""
    if not query.strip():
        return sorted(stickers, key=lambda s: -s.uses)[:SEARCH_LIMIT]
    scored = [(match_score(query, s), s) for s in stickers]
    fits = sorted((pair for pair in scored if pair[0] > 0), key=lambda p: (-p[0], -p[1].uses))
    return [s for _, s in fits[:SEARCH_LIMIT]]


def _spec(name: str, description: str, parameters: Mapping[str, Any], tag: ToolTag) -> ToolSpec:
    return ToolSpec(
        name=name,
        description=description,
        parameters=parameters,
        tags=frozenset({tag}),
        domains=(DOMAIN,),
        hints=HINTS,
        visibility=Visibility.DEFERRED,
        timeout_s=5.0,
    )


class _StickerTool(Tool):
    def __init__(self, library: StickerLibrary, rng: Callable[[], random.Random]) -> None:
        self._library = library
        self._rng = rng


class StickerSearchTool(_StickerTool):
    """`sticker.search`: which stickers the bot has for a feeling or a word."""

    spec = _spec(
        "sticker.search",
        "按情绪或关键词找我收藏的表情包，返回每张的 id、说明和情绪；"
        "选中后用 sticker.send 发。query 留空就列出最常用的。",
        {
            "type": "object",
            "properties": {"query": {"type": "string", "description": "情绪或关键词，如“无语”"}},
        },
        ToolTag.READ_ONLY,
    )

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        stickers = await self._library.enabled()
        if not stickers:
            return ToolOutput({"结果": [], "说明": "还没有收藏的表情包"})
        found = search_stickers(str(arguments.get("query") or ""), stickers)
        return ToolOutput({"结果": [listed(s) for s in found]})


class StickerSendTool(_StickerTool):
    """`sticker.send`: choose the sticker this turn's reply carries."""

    spec = _spec(
        "sticker.send",
        "选一张表情包随这次回复发出（给 id，或给情绪让我挑）。选好后照常用 reply 结束："
        "只想发表情就让 text 只写 [表情:情绪]，不要再把同样的意思写成字。",
        {
            "type": "object",
            "properties": {
                "sticker_id": {"type": "string", "description": "sticker.search 给的 id"},
                "emotion": {"type": "string", "description": "没有 id 时，想表达的情绪"},
            },
        },
        ToolTag.SIDE_EFFECT,
    )

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        stickers = await self._library.enabled()
        wanted_id = str(arguments.get("sticker_id") or "").strip().lower()
        emotion = str(arguments.get("emotion") or "").strip()
        if wanted_id:
            sticker = next((s for s in stickers if short_id(s) == wanted_id), None)
        else:
            sticker = pick_sticker(emotion, stickers, self._rng())
        if sticker is None:
            raise ToolError("没有这张表情包" if wanted_id else f"没有适合“{emotion}”的表情包")
        context.choices[CHOSEN] = sticker.sha256
        return ToolOutput({"已选": listed(sticker), "说明": "会随本轮回复发出"})


def sticker_tools(library: StickerLibrary, rng: Callable[[], random.Random]) -> tuple[Tool, ...]:
    return (StickerSearchTool(library, rng), StickerSendTool(library, rng))
