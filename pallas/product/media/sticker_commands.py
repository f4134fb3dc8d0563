"""The owner's sticker commands: add a picture to the bot's collection, list it, take one out.

  /收藏表情 [说明] [情绪…]   with a picture in the same message, or quoting one
  /表情库                    what the collection holds
  /删表情 <id>               stop sending that one (its file stays)

Without a caption the vision model labels the picture (within the hourly budget). The owner's
caption and feelings replace whatever a label said.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from pallas.core.inbound import SegmentKind
from pallas.product.conversation.commands import CommandCall
from pallas.product.media.describe import DescribeDeps, file_of
from pallas.product.media.sticker_store import StickerLibrary
from pallas.product.media.sticker_tools import short_id
from pallas.product.media.vision import EMOTIONS, clean_description
from pallas.store.asset_store import StoredAsset
from pallas.store.message_media import message_segments, quoted_message_id

LIST_LIMIT = 15


def parse_caption(args: str) -> tuple[str, tuple[str, ...]]:
    """(caption, feelings) from the command's words: feelings are words of the vocabulary,
    the rest is the caption (pure)."""
    words = args.split()
    feelings = tuple(dict.fromkeys(w for w in words if w in EMOTIONS))
    caption = clean_description(" ".join(w for w in words if w not in EMOTIONS))
    return caption, feelings


class CollectStickerCommand:
    name = "收藏表情"
    summary = "把这条消息里（或引用的消息里）的图收进表情库：/收藏表情 [说明] [情绪]"

    def __init__(
        self, library: StickerLibrary, deps: DescribeDeps, clock: Callable[[], datetime]
    ) -> None:
        self._library = library
        self._deps = deps
        self._clock = clock

    async def run(self, call: CommandCall) -> str:
        asset = await self._picture(call)
        if asset is None:
            return "没找到图：把图和命令放在同一条消息里，或者引用一条带图的消息再发命令。"
        caption, feelings = parse_caption(call.args)
        if not caption:
            label = await self._deps.labeller.label(asset, sticker=True, why="an owner's sticker")
            if label is None:
                return "这张图还没有说明，请在命令后写上，比如：/收藏表情 猫猫无语 无语"
            caption, feelings = label.description, feelings or label.emotions
        await self._library.add(
            asset.sha256, caption, feelings, "owner", self._clock(), replace=True
        )
        shown = f"（情绪：{'、'.join(feelings)}）" if feelings else ""
        return f"收好了：{caption}{shown}，id {asset.sha256[:8]}"

    async def _picture(self, call: CommandCall) -> StoredAsset | None:
        stored = call.stored
        message_id: int | None = stored.message_id
        if not any(s.kind is SegmentKind.IMAGE for s in stored.message.segments):
            reply_to = stored.message.reply_to
            message_id = (
                await quoted_message_id(self._deps.assets.engine, stored.stream_id, reply_to)
                if reply_to
                else None
            )
        if message_id is None:
            return None
        segments = await message_segments(self._deps.assets.engine, message_id)
        return await _first_picture(segments, message_id, self._deps)


async def _first_picture(
    segments: list[dict[str, Any]], message_id: int, deps: DescribeDeps
) -> StoredAsset | None:
    for index, segment in enumerate(segments):
        if segment.get("kind") == SegmentKind.IMAGE.value:
            asset = await file_of(segment, message_id, index, deps)
            if asset is not None and asset.width:
                return asset
    return None


class StickerListCommand:
    name = "表情库"
    summary = "看看表情库里有什么"

    def __init__(self, library: StickerLibrary) -> None:
        self._library = library

    async def run(self, call: CommandCall) -> str:
        stickers = await self._library.enabled()
        if not stickers:
            return "表情库还是空的。发 /收藏表情 收一张，群里常用的表情也会自动收进来。"
        shown = sorted(stickers, key=lambda s: -s.uses)[:LIST_LIMIT]
        lines = [f"{short_id(s)} {s.caption}（用过{s.uses}次）" for s in shown]
        more = f"\n……共 {len(stickers)} 张" if len(stickers) > LIST_LIMIT else ""
        return "表情库：\n" + "\n".join(lines) + more


class DropStickerCommand:
    name = "删表情"
    summary = "不再发某张表情：/删表情 <id>"

    def __init__(self, library: StickerLibrary) -> None:
        self._library = library

    async def run(self, call: CommandCall) -> str:
        wanted = call.args.strip().lower()
        stickers = await self._library.enabled()
        sticker = next((s for s in stickers if wanted and short_id(s) == wanted), None)
        if sticker is None:
            return "没有这个 id 的表情，发 /表情库 看看有哪些。"
        await self._library.set_enabled(sticker.sha256, False)
        return f"好，以后不发“{sticker.caption}”了。"
