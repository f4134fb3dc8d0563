"""Fetching a media file the platform named in one of its own events (an image's `url`).

Only URLs that came from NapCat's events come here; a URL a model proposes goes through the web
guard instead (docs/tools.md). Every fetch is bounded: a total time and a size, checked as the
body streams in, so a 200 MB "image" costs at most `max_bytes` of memory and bandwidth.
"""

from __future__ import annotations

from asyncio import timeout as asyncio_timeout
from dataclasses import dataclass

import httpx

MAX_MEDIA_BYTES = 10 * 1024 * 1024  # a group picture or sticker is far smaller
FETCH_TIMEOUT_S = 15.0


class MediaUnavailable(Exception):
    """The file could not be fetched within the limits; the message says why (English)."""


@dataclass(frozen=True)
class MediaLimits:
    max_bytes: int = MAX_MEDIA_BYTES
    timeout_s: float = FETCH_TIMEOUT_S


async def fetch_media(client: httpx.AsyncClient, url: str, limits: MediaLimits) -> bytes:
    if not url.startswith(("http://", "https://")):
        raise MediaUnavailable(f"not an http(s) URL: {url[:80]!r}")
    try:
        async with asyncio_timeout(limits.timeout_s):
            return await _download(client, url, limits.max_bytes)
    except TimeoutError:
        raise MediaUnavailable(f"no complete answer within {limits.timeout_s:g} s") from None
    except httpx.HTTPError as exc:
        raise MediaUnavailable(f"{type(exc).__name__}: {exc}"[:200]) from None


async def _download(client: httpx.AsyncClient, url: str, max_bytes: int) -> bytes:
    async with client.stream("GET", url, follow_redirects=True) as response:
        if response.status_code != 200:
            raise MediaUnavailable(f"HTTP {response.status_code}")
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > max_bytes:
            raise MediaUnavailable(f"{int(declared):,} bytes declared, the cap is {max_bytes:,}")
        body = bytearray()
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) > max_bytes:
                raise MediaUnavailable(f"more than {max_bytes:,} bytes")
        return bytes(body)
