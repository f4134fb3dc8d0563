"""The group's words on the console (docs/slang.md, "On the console"): each group's learned
terms with when and from which lines, the terms still listened to, the samples of how the
group answers; an owner adds, corrects and deletes meanings and removes samples.

  GET    /pallas/api/slang                          the groups with terms or samples
  GET    /pallas/api/slang/{stream_id}              one group's terms and samples
  PUT    /pallas/api/slang/{stream_id}/terms        {"term", "meaning"}: add or correct
  DELETE /pallas/api/slang/{stream_id}/terms?term=  delete for good (not learned again)
  DELETE /pallas/api/slang/samples/{sample_id}      a sample removed
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Any

from fastapi import APIRouter, HTTPException
from loguru import logger
from pydantic import BaseModel, Field
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.platform.http_params import RowId
from pallas.product.ports import OwnerPage
from pallas.product.slang.reference import simplified
from pallas.product.slang.rules import MAX_MEANING_CHARS, MAX_TERM_CHARS, meaning_refusal
from pallas.product.slang.store import SlangStore, Term
from pallas.store.conversation import lines_by_ids, stream_info

SLANG_PAGE = OwnerPage(
    key="slang",
    title="群里的说法",
    intro="机器人从各群学到的黑话（外号、梗、缩写）和从哪几句学的，还在留意的词，"
    "以及它回话时参考的群友说话样子；可以改、删、补。",
    script=Path(__file__).parent / "static" / "slang.js",
)


class TermEdit(BaseModel):
    term: str = Field(min_length=1, max_length=MAX_TERM_CHARS)
    meaning: str = Field(min_length=1, max_length=MAX_MEANING_CHARS)


def term_json(term: Term, lines: dict[int, str]) -> dict[str, Any]:
    found = asdict(term)
    for key in ("first_seen", "last_seen", "learned_at", "last_used_at"):
        value = found[key]
        found[key] = value.isoformat() if isinstance(value, datetime) else None
    found["learned_from"] = [{"id": i, "text": lines.get(i)} for i in term.learned_from]
    found["evidence"] = [{"id": i, "text": lines.get(i)} for i in term.evidence]
    return found


def slang_routes(
    engine: AsyncEngine, store: SlangStore, clock: Callable[[], datetime]
) -> APIRouter:
    router = APIRouter()

    async def group(stream_id: int) -> str:
        info = await stream_info(engine, stream_id)
        if info is None or info.kind != "group":
            raise HTTPException(404, "没有这个群")
        return info.name or info.external_id

    @router.get("/slang", tags=["slang"])
    async def groups() -> dict[str, Any]:
        found = []
        for stream_id, terms, samples in await store.groups():
            info = await stream_info(engine, stream_id)
            if info is not None:
                found.append({"stream_id": stream_id, "group": info.external_id,
                              "name": info.name, "terms": terms, "samples": samples})  # fmt: skip
        return {"groups": found}

    @router.get("/slang/{stream_id}", tags=["slang"])
    async def one(stream_id: RowId) -> dict[str, Any]:
        name = await group(stream_id)
        terms = await store.terms(stream_id)
        ids = sorted({i for t in terms for i in (*t.evidence, *t.learned_from)})
        lines = {ln.message_id: f"{ln.speaker}：{ln.text[:100]}"
                 for ln in await lines_by_ids(engine, stream_id, ids)}  # fmt: skip
        samples = await store.samples(stream_id)
        return {"name": name, "terms": [term_json(t, lines) for t in terms],
                "samples": [{**asdict(s), "kept_at": s.kept_at.isoformat()}
                            for s in samples]}  # fmt: skip

    @router.put("/slang/{stream_id}/terms", tags=["slang"])
    async def teach(stream_id: RowId, edit: TermEdit) -> dict[str, str]:
        await group(stream_id)
        term = simplified(edit.term).strip().lower()
        refusal = meaning_refusal(term, edit.meaning, clock())
        if not term or re.search(r"[0-9]{5,}", term) or refusal is not None:
            raise HTTPException(400, "这个词或意思不能记：不能是号码，不能骂人或说别人的隐私")
        await store.set_meaning(stream_id, term, edit.meaning.strip(), "console", clock())
        logger.info("console: slang {!r} of chat {} set by the owner", term, stream_id)
        return {"term": term}

    @router.delete("/slang/{stream_id}/terms", tags=["slang"])
    async def forget(stream_id: RowId, term: str = "") -> dict[str, bool]:
        await group(stream_id)
        if not await store.delete(stream_id, simplified(term).strip().lower()[:64], "console"):
            raise HTTPException(404, "没有这个词")
        logger.info("console: slang {!r} of chat {} deleted by the owner", term[:32], stream_id)
        return {"deleted": True}

    @router.delete("/slang/samples/{sample_id}", tags=["slang"])
    async def drop(sample_id: RowId) -> dict[str, bool]:
        if not await store.drop_sample(sample_id):
            raise HTTPException(404, "没有这个样子")
        return {"removed": True}

    return router
