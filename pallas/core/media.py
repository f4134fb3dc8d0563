"""What a media file is, judged by its content, never by its name or the sender's word.

Pillow (several MB of modules) is imported on first use, so a bot that never sees a picture
never carries it.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

# How a picture, a sticker and a voice read in the timeline until they are understood.
PICTURE_PLACEHOLDER = "[图片]"
STICKER_PLACEHOLDER = "[动画表情]"
VOICE_PLACEHOLDER = "[语音]"
UNDESCRIBED = (PICTURE_PLACEHOLDER, STICKER_PLACEHOLDER)


def is_sticker_text(text: str) -> bool:
    """A sticker's segment text, described ("[动画表情：猫猫无语]") or not."""
    return text.startswith(STICKER_PLACEHOLDER[:-1])


def placeholder_of(text: str) -> str:
    """A described placeholder back to the bare one: "[图片：一只猫]" -> "[图片]"."""
    head, colon, _ = text.partition("：")
    return f"{head}]" if colon and head.startswith("[") and text.endswith("]") else text


def described(placeholder: str, description: str) -> str:
    """The placeholder with what it shows: "[图片]" -> "[图片：一只猫]"."""
    return f"{placeholder[:-1]}：{description}]"


MAX_PIXELS = 40_000_000  # larger is a decompression bomb, not a group picture


@dataclass(frozen=True)
class MediaInfo:
    mime: str  # image/png, image/jpeg, image/gif, image/webp, audio/wav, audio/mpeg, ...
    extension: str  # png, jpg, gif, webp, ...
    width: int  # 0 for audio
    height: int
    animated: bool


class NotMedia(ValueError):
    """The bytes are not a usable image or sound (another type, corrupt, or absurdly large)."""


def sniff_image(data: bytes) -> MediaInfo:
    """The image `data` holds, checked by decoding its header and verifying its structure."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as image:
            fmt = image.format or ""
            width, height = image.size
            animated = bool(getattr(image, "is_animated", False))
            if width * height > MAX_PIXELS:
                raise NotMedia(f"{width}x{height} pixels is more than {MAX_PIXELS:,}")
            image.verify()  # the structure, chunk checksums included, without decoding it all
    except NotMedia:
        raise
    except (
        UnidentifiedImageError,
        OSError,
        SyntaxError,
        ValueError,
        Image.DecompressionBombError,
    ) as exc:
        raise NotMedia(f"not a readable image: {exc}") from None
    mime = Image.MIME.get(fmt, "")
    if not mime:
        raise NotMedia(f"an image format without a known type: {fmt or 'unknown'}")
    extension = {"JPEG": "jpg"}.get(fmt, fmt.lower())
    return MediaInfo(mime, extension, width, height, animated)


# Audio containers by their first bytes: (prefix, offset, mime, extension). SILK and AMR are
# what QQ voice messages are made of; the others are what speech services read and write.
_AUDIO_MAGIC: tuple[tuple[bytes, int, str, str], ...] = (
    (b"WAVE", 8, "audio/wav", "wav"),
    (b"OggS", 0, "audio/ogg", "ogg"),
    (b"fLaC", 0, "audio/flac", "flac"),
    (b"ID3", 0, "audio/mpeg", "mp3"),
    (b"#!AMR", 0, "audio/amr", "amr"),
    (b"#!SILK", 0, "audio/silk", "silk"),
    (b"\x02#!SILK", 0, "audio/silk", "silk"),
    (b"ftypM4A", 4, "audio/mp4", "m4a"),
)
MIN_AUDIO_BYTES = 32
# Formats OpenAI-compatible transcription services accept; SILK and AMR need converting first.
TRANSCRIBABLE = frozenset({"audio/wav", "audio/ogg", "audio/flac", "audio/mpeg", "audio/mp4"})


def sniff_audio(data: bytes) -> MediaInfo:
    """The audio container `data` holds, by its magic bytes (width and height are 0)."""
    if len(data) >= MIN_AUDIO_BYTES:
        if data[:4] == b"RIFF" and data[8:12] == b"WAVE":
            return MediaInfo("audio/wav", "wav", 0, 0, False)
        for magic, offset, mime, extension in _AUDIO_MAGIC[1:]:
            if data[offset : offset + len(magic)] == magic:
                return MediaInfo(mime, extension, 0, 0, False)
        if data[0] == 0xFF and data[1] & 0xE0 == 0xE0:  # an MPEG audio frame without a tag
            return MediaInfo("audio/mpeg", "mp3", 0, 0, False)
    raise NotMedia("not a known audio format")


def sniff_media(data: bytes) -> MediaInfo:
    """An image or an audio file, checked by content; anything else raises NotMedia."""
    try:
        return sniff_audio(data)
    except NotMedia:
        return sniff_image(data)
