"""Real picture bytes for the media tests, made with Pillow."""

from __future__ import annotations

import io

from PIL import Image


def picture(color: str = "red", size: tuple[int, int] = (8, 6), fmt: str = "PNG") -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, color).save(out, format=fmt)
    return out.getvalue()
