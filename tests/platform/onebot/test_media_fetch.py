"""Fetching platform media against a real local HTTP server: the picture comes whole; a huge
body, a stall, an error status or a non-web URL each end with a clear reason, early."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from pallas.platform.onebot.media_fetch import MediaLimits, MediaUnavailable, fetch_media
from tests.support.fake_web import Big, Endless, FakeWebServer, Page
from tests.support.pictures import picture

LIMITS = MediaLimits(max_bytes=1024 * 1024, timeout_s=1.0)


@pytest.fixture
async def web() -> AsyncIterator[FakeWebServer]:
    async with FakeWebServer() as server:
        yield server


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as http:
        yield http


async def test_a_picture_comes_whole(web: FakeWebServer, client: httpx.AsyncClient) -> None:
    web.routes["/pic.png"] = Page(picture("blue", (4, 4)), content_type="image/png")
    assert await fetch_media(client, web.url("/pic.png"), LIMITS) == picture("blue", (4, 4))


async def test_a_200_mb_image_is_cut_off_at_the_cap(
    web: FakeWebServer, client: httpx.AsyncClient
) -> None:
    web.routes["/huge"] = Big(200 * 1024 * 1024, content_type="image/png")
    with pytest.raises(MediaUnavailable, match=r"cap is 1,048,576|more than 1,048,576"):
        await fetch_media(client, web.url("/huge"), LIMITS)
    assert web.bytes_sent < 20 * 1024 * 1024  # far from the 200 MB on offer


async def test_an_endless_body_is_cut_off_at_the_cap(
    web: FakeWebServer, client: httpx.AsyncClient
) -> None:
    web.routes["/endless"] = Endless(content_type="image/png")
    with pytest.raises(MediaUnavailable, match="more than"):
        await fetch_media(client, web.url("/endless"), LIMITS)


@pytest.mark.parametrize(
    ("route", "reason"),
    [
        (Page(b"", delay_s=5.0), "no complete answer within 1 s"),
        (Endless(interval_s=0.2), "no complete answer within 1 s"),
        (Page(b"gone", status=404), "HTTP 404"),
    ],
)
async def test_a_url_that_never_answers_or_fails_ends_with_its_reason(
    web: FakeWebServer, client: httpx.AsyncClient, route: Page | Endless, reason: str
) -> None:
    web.routes["/x"] = route
    with pytest.raises(MediaUnavailable, match=reason):
        await fetch_media(client, web.url("/x"), LIMITS)


@pytest.mark.parametrize("url", ["file:///etc/passwd", "", "ftp://example.com/a.png"])
async def test_only_web_urls_are_fetched(client: httpx.AsyncClient, url: str) -> None:
    with pytest.raises(MediaUnavailable, match="not an http"):
        await fetch_media(client, url, LIMITS)
