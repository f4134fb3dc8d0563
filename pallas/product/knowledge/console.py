"""The knowledge folder on the console (docs/knowledge.md, "On the console"): the documents
and why one was skipped, a document's passages, a search box to try a question as a chat
would ask it, and adding or removing a file; the page's script draws from these routes.

  GET    /pallas/api/knowledge                    the documents
  GET    /pallas/api/knowledge/docs/{id}/chunks   a document's passages
  GET    /pallas/api/knowledge/search?q=&group=   what a chat (a group's number, or none)
                                                  would be given for a question
  POST   /pallas/api/knowledge/files?name=&group= a file's bytes as the body (at most the
                                                  console's 1 MB; larger ones go in the
                                                  folder on disk)
  DELETE /pallas/api/knowledge/docs/{id}          the file removed from the folder
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from loguru import logger

from pallas.core.inbound import StreamKey, StreamKind
from pallas.platform.http_params import RowId
from pallas.product.knowledge.parsing import SUFFIXES
from pallas.product.knowledge.recall import scopes_of
from pallas.product.knowledge.store import KnowledgeStore
from pallas.product.ports import OwnerPage

KNOWLEDGE_PAGE = OwnerPage(
    key="knowledge",
    title="知识库",
    intro="机器人回答问题时能查的文档：哪些读进去了、哪些没读和为什么；可以试着问一句看它能找到什么。",
    script=Path(__file__).parent / "static" / "knowledge.js",
)
_NAME = re.compile(r"[^/\\\x00\n\r]{1,120}")
_GROUP = re.compile(r"[0-9]{0,20}", re.ASCII)


def upload_target(root: Path, name: str, group: str) -> Path:
    """Where an uploaded file goes, or HTTPException 400 with why (pure but for the path)."""
    if not _NAME.fullmatch(name) or name.startswith("."):
        raise HTTPException(400, "文件名不对：不能带路径，不能以 . 开头")
    if Path(name).suffix.lower() not in SUFFIXES:
        raise HTTPException(400, "只能放 .md .txt .html .pdf .docx")
    if not _GROUP.fullmatch(group):
        raise HTTPException(400, "group 要是群号，或者不填（所有聊天都能用）")
    return (root / group / name) if group else (root / name)


def inside(root: Path, path: Path) -> bool:
    """Whether the folder a path is in resolves inside the knowledge folder (a symlinked
    group folder does not)."""
    return path.parent.resolve().is_relative_to(root.resolve())


def knowledge_routes(
    store: KnowledgeStore, root: Path, rescan: Callable[[], Awaitable[None]]
) -> APIRouter:
    """`rescan` asks for a scan now (a job): an upload or a removal is seen at once."""
    router = APIRouter()

    @router.get("/knowledge", tags=["knowledge"])
    async def documents() -> dict[str, Any]:
        return {"folder": str(root), "docs": [
            {**asdict(d), "indexed_at": d.indexed_at.isoformat()} for d in await store.docs()
        ]}  # fmt: skip

    @router.get("/knowledge/docs/{doc_id}/chunks", tags=["knowledge"])
    async def chunks(doc_id: RowId) -> dict[str, Any]:
        if await store.doc(doc_id) is None:
            raise HTTPException(404, "没有这个文档")
        found = await store.chunks_of(doc_id)
        return {"chunks": [{"heading": heading, "text": text} for heading, text in found]}

    @router.get("/knowledge/search", tags=["knowledge"])
    async def search(q: str = "", group: str = "") -> dict[str, Any]:
        if not _GROUP.fullmatch(group):
            raise HTTPException(400, "group 要是群号，或者不填")
        kind = StreamKind.GROUP if group else StreamKind.PRIVATE
        scopes = scopes_of(StreamKey("qq", "", kind, group or "0"))
        found = await store.search(q[:500], scopes, 5)
        return {"passages": [{"path": p.path, "heading": p.heading, "text": p.text,
                              "coverage": round(p.coverage, 2)} for p in found]}  # fmt: skip

    @router.post("/knowledge/files", tags=["knowledge"])
    async def upload(request: Request, name: str = "", group: str = "") -> dict[str, str]:
        target = upload_target(root, name, group)
        data = await request.body()
        if not data:
            raise HTTPException(400, "文件是空的")
        target.parent.mkdir(parents=True, exist_ok=True)
        if not inside(root, target):
            raise HTTPException(400, "这个群的文件夹不在知识库里")
        partial = target.with_name(f".{target.name}.part")  # hidden: no scan reads it half
        partial.unlink(missing_ok=True)  # a link left there is removed, not followed
        with partial.open("xb") as written:
            written.write(data)
        partial.replace(target)
        logger.info("console: knowledge file {} added by the owner", target.relative_to(root))
        await rescan()
        return {"path": target.relative_to(root).as_posix()}

    @router.delete("/knowledge/docs/{doc_id}", tags=["knowledge"])
    async def remove(doc_id: RowId) -> dict[str, bool]:
        doc = await store.doc(doc_id)
        if doc is None:
            raise HTTPException(404, "没有这个文档")
        path = root / doc.path
        if inside(root, path):  # the entry itself, even a symlink: never what it points at
            path.unlink(missing_ok=True)
        await store.drop([doc.path])
        logger.info("console: knowledge file {} removed by the owner", doc.path)
        await rescan()
        return {"removed": True}

    return router
