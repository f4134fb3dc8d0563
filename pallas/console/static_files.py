"""The console's stylesheet and script, served as files so the pages need no inline style
or script and the Content-Security-Policy can forbid both (boundary.py)."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, HTTPException
from fastapi.responses import Response

STATIC = Path(__file__).parent / "static"
TYPES = {
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
}
# Read once: a fixed set of names, so no path from a request ever reaches the file system.
FILES = {path.name: (path.read_bytes(), TYPES[path.suffix]) for path in STATIC.iterdir()
         if path.suffix in TYPES}  # fmt: skip
MAX_AGE_S = 300


def static_routes() -> APIRouter:
    router = APIRouter(prefix="/pallas/static", include_in_schema=False)

    @router.get("/{name}")
    async def static_file(name: str) -> Response:
        if name not in FILES:
            raise HTTPException(404, "没有这个文件")
        body, media_type = FILES[name]
        return Response(body, media_type=media_type,
                        headers={"cache-control": f"max-age={MAX_AGE_S}"})  # fmt: skip

    return router
