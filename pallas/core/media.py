"""What a media file is, judged by its content, never by its name or the sender's word.

Pillow (several MB of modules) is imported on first use, so a bot that never sees a picture
never carries it.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

MAX_PIXELS = 40_000_000  # larger is a decompression bomb, not a group picture


@dataclass(frozen=True)
class ImageInfo:
    mime: str  # image/png, image/jpeg, image/gif, image/webp, ...
    extension: str  # png, jpg, gif, webp, ...
    width: int
    height: int
    animated: bool


class NotMedia(ValueError):
    """The bytes are not a usable image (another type, corrupt, or absurdly large)."""


def sniff_image(data: bytes) -> ImageInfo:
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
    return ImageInfo(mime, extension, width, height, animated)
