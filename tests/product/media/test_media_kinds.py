"""What a media file is, judged by its bytes, and how a placeholder carries what it shows."""

from __future__ import annotations

import pytest

from pallas.core.media import (
    MIN_AUDIO_BYTES,
    PICTURE_PLACEHOLDER,
    STICKER_PLACEHOLDER,
    VOICE_PLACEHOLDER,
    MediaInfo,
    NotMedia,
    described,
    is_sticker_text,
    placeholder_of,
    sniff_audio,
    sniff_media,
)
from tests.support.fake_llm import silent_wav
from tests.support.pictures import picture


def padded(prefix: bytes, size: int = MIN_AUDIO_BYTES) -> bytes:
    return prefix + b"\x00" * (size - len(prefix))


def test_a_real_wav_is_audio_without_dimensions() -> None:
    assert sniff_audio(silent_wav()) == MediaInfo("audio/wav", "wav", 0, 0, False)
    assert sniff_audio(silent_wav(samples=0)).mime == "audio/wav"  # a header alone is 44 bytes


@pytest.mark.parametrize(
    ("prefix", "mime", "extension"),
    [
        (b"OggS", "audio/ogg", "ogg"),
        (b"fLaC", "audio/flac", "flac"),
        (b"ID3", "audio/mpeg", "mp3"),
        (b"#!AMR", "audio/amr", "amr"),
        (b"#!SILK_V3", "audio/silk", "silk"),
        (b"\x02#!SILK_V3", "audio/silk", "silk"),  # how QQ stores its voice messages
        (b"\x00\x00\x00\x20ftypM4A ", "audio/mp4", "m4a"),
        (b"\xff\xfb\x90\x64", "audio/mpeg", "mp3"),  # an MPEG frame without a tag
        (b"\xff\xf3", "audio/mpeg", "mp3"),
    ],
    ids=["ogg", "flac", "id3", "amr", "silk", "qq silk", "m4a", "mpeg frame", "mpeg 2 frame"],
)
def test_audio_containers_are_known_by_their_first_bytes(
    prefix: bytes, mime: str, extension: str
) -> None:
    assert sniff_audio(padded(prefix)) == MediaInfo(mime, extension, 0, 0, False)
    assert sniff_audio(padded(prefix, 4096)).mime == mime


@pytest.mark.parametrize(
    "data",
    [
        b"",
        padded(b"OggS", MIN_AUDIO_BYTES - 1),  # the right magic, too short to be a file
        silent_wav()[: MIN_AUDIO_BYTES - 1],
        b"\x00" * 64,
        bytes(range(1, 65)),
        b"this is plain text and not a sound at all, really",
        padded(b"RIFF\x24\x00\x00\x00AVI LIST"),  # a RIFF container that is not WAVE
        padded(b"\xff\xd8\xff\xe0\x00\x10JFIF"),  # a JPEG's start is not an MPEG frame
        padded(b"SILK"),  # the magic somewhere else than at the start
        padded(b"   OggS"),
    ],
    ids=[
        "empty",
        "short ogg",
        "short wav",
        "zeros",
        "counting bytes",
        "text",
        "riff avi",
        "jpeg start",
        "bare silk word",
        "ogg not at the start",
    ],
)
def test_what_is_no_known_audio_is_refused(data: bytes) -> None:
    with pytest.raises(NotMedia):
        sniff_audio(data)


def test_media_is_a_picture_or_a_sound_and_nothing_else() -> None:
    png = sniff_media(picture("blue", (7, 5)))
    assert (png.mime, png.extension, png.width, png.height) == ("image/png", "png", 7, 5)
    jpeg = sniff_media(picture("blue", (4, 4), fmt="JPEG"))
    assert (jpeg.mime, jpeg.extension) == ("image/jpeg", "jpg")
    assert sniff_media(silent_wav()) == MediaInfo("audio/wav", "wav", 0, 0, False)
    with pytest.raises(NotMedia):
        sniff_media(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj << /Type /Catalog >> endobj\n")
    with pytest.raises(NotMedia):
        sniff_media(b"")


def test_a_placeholder_takes_a_description_and_gives_it_back() -> None:
    shown = described(PICTURE_PLACEHOLDER, "一只猫")
    assert shown == "[图片：一只猫]"
    assert placeholder_of(shown) == PICTURE_PLACEHOLDER
    assert placeholder_of(described(STICKER_PLACEHOLDER, "猫猫无语")) == STICKER_PLACEHOLDER
    assert placeholder_of(described(VOICE_PLACEHOLDER, "明天几点集合")) == VOICE_PLACEHOLDER
    # A description holding a colon of its own still comes back to the bare placeholder.
    assert placeholder_of(described(PICTURE_PLACEHOLDER, "标题：猫")) == PICTURE_PLACEHOLDER


@pytest.mark.parametrize(
    "text",
    ["[图片]", "[动画表情]", "你好", "备注：明天见", "备注：[图片]", "[图片：没有结尾", ""],
)
def test_what_is_no_described_placeholder_is_left_as_it_is(text: str) -> None:
    assert placeholder_of(text) == text


def test_a_sticker_text_is_known_described_or_not() -> None:
    assert is_sticker_text("[动画表情：x]")
    assert is_sticker_text(STICKER_PLACEHOLDER)
    assert is_sticker_text(described(STICKER_PLACEHOLDER, "猫猫无语"))
    assert not is_sticker_text(PICTURE_PLACEHOLDER)
    assert not is_sticker_text("[图片：一个动画表情]")
    assert not is_sticker_text("动画表情")
