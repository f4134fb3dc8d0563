"""Media's tables: who sends which sticker how often, and the bot's own sticker collection
(docs/media.md). They share the one metadata; their history is the core's migrations (made
before the feature seam, docs/architecture.md). The files themselves are the core's assets."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, ForeignKey, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from pallas.store.schema_base import Base, Id, UtcDateTime


class StickerUse(Base):
    """How often a person sent a sticker in a group: a lower bound (pictures not kept are not
    counted), summed by the sticker-habit scan (docs/media.md)."""

    __tablename__ = "sticker_use"

    stream_id: Mapped[int] = mapped_column(Id, ForeignKey("stream.id"), primary_key=True)
    person_id: Mapped[int] = mapped_column(Id, ForeignKey("person.id"), primary_key=True)
    sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    count: Mapped[int] = mapped_column(Integer)
    first_seen_at: Mapped[datetime] = mapped_column(UtcDateTime())
    last_seen_at: Mapped[datetime] = mapped_column(UtcDateTime())
    # When this favourite became a person fact (`常用表情包：…`); empty until then.
    promoted_at: Mapped[datetime | None] = mapped_column(UtcDateTime())


class Sticker(Base):
    """The bot's own sticker collection: files it may send, labelled by caption and emotion
    (docs/media.md). A library file is never dropped by retention."""

    __tablename__ = "sticker"

    sha256: Mapped[str] = mapped_column(String(64), ForeignKey("asset.sha256"), primary_key=True)
    caption: Mapped[str] = mapped_column(String(80))
    emotions: Mapped[str] = mapped_column(String(200))  # space-separated, from EMOTIONS
    source: Mapped[str] = mapped_column(String(16))  # group / owner
    added_at: Mapped[datetime] = mapped_column(UtcDateTime())
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    uses: Mapped[int] = mapped_column(Integer, default=0)  # counted after the platform's receipt
    last_sent_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
