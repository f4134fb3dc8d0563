"""What media adds to the console: the bot's sticker collection as a page of its own, where
the owner sees each sticker, renames it, removes it, or adds one by uploading a picture
(docs/console.md). The page is a script over these API routes, behind the console's guard
(a signed-in browser's cookie and CSRF value, or the token)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import FileResponse
from loguru import logger
from pydantic import BaseModel, Field

from pallas.core.assets import asset_file
from pallas.core.media import NotMedia, sniff_image
from pallas.product.media.sticker_store import StickerLibrary
from pallas.product.ports import OwnerPage
from pallas.store.asset_store import AssetStore

SHA256 = re.compile(r"^[0-9a-f]{64}$")
SOURCE = "owner"
PICTURES = frozenset({"png", "jpg", "gif", "webp"})  # what QQ shows as a sticker
MAX_CAPTION = 80
PAGE = OwnerPage(
    key="stickers",
    title="表情包",
    intro=(
        "机器人自己的表情包：它用表情包回复时从这里挑。"
        "可以改说明、移除，或上传一张（1 MB 以内）。"
    ),
    script=Path(__file__).parent / "static" / "stickers.js",
)


class Caption(BaseModel):
    caption: str = Field(min_length=1, max_length=MAX_CAPTION)


def _sha(value: str) -> str:
    if not SHA256.match(value):
        raise HTTPException(404, "没有这张表情包")
    return value


def _words(caption: str) -> str:
    """A caption in one line; 422 when empty or longer than a sticker keeps."""
    words = " ".join(caption.split())
    if not words or len(words) > MAX_CAPTION:
        raise HTTPException(422, f"给表情包写一句说明（它什么时候用），最多 {MAX_CAPTION} 字")
    return words


async def _picture(data: bytes) -> None:
    """422 unless `data` is a picture QQ shows as a sticker."""
    try:
        info = await asyncio.to_thread(sniff_image, data)
    except NotMedia:
        info = None
    if info is None or info.extension not in PICTURES:
        raise HTTPException(422, "这不是一张能用的图片（PNG、JPEG、GIF 或 WebP）")


def sticker_routes(
    library: StickerLibrary, assets: AssetStore, clock: Callable[[], datetime]
) -> APIRouter:
    router = APIRouter(prefix="/stickers", tags=["stickers"])

    @router.get("")
    async def listed() -> list[dict[str, Any]]:
        return [asdict(s) | {"reference": s.reference} for s in await library.enabled()]

    @router.get("/{sha256}/file")
    async def picture(sha256: str) -> FileResponse:
        stored = await assets.get(_sha(sha256))
        if stored is None:
            raise HTTPException(404, "没有这张表情包")
        return FileResponse(asset_file(assets.folder, stored.path), media_type=stored.mime)

    @router.put("/{sha256}")
    async def rename(sha256: str, body: Caption) -> dict[str, bool]:
        if not await library.rename(_sha(sha256), _words(body.caption)):
            raise HTTPException(404, "没有这张表情包")
        logger.info("console: sticker {} renamed by the owner", sha256[:12])
        return {"renamed": True}

    @router.delete("/{sha256}")
    async def remove(sha256: str) -> dict[str, bool]:
        logger.info("console: sticker {} removed by the owner", sha256[:12])
        return {"removed": await library.set_enabled(_sha(sha256), False)}

    @router.post("")
    async def upload(request: Request, caption: str = "") -> dict[str, str]:
        words, data = _words(caption), await request.body()
        await _picture(data)
        stored = await assets.put(data, clock(), source=SOURCE)
        # A picture already in the collection keeps its feelings; it gets the new caption.
        await library.add(stored.sha256, words, (), SOURCE, clock())
        await library.rename(stored.sha256, words)
        await library.set_enabled(stored.sha256, True)
        logger.info("console: sticker {} added by the owner", stored.sha256[:12])
        return {"sha256": stored.sha256}

    return router
