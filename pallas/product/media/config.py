"""The media knobs (`media:` in config/agent.yml); every field has a safe default."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class MediaConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # Vision calls per hour, over pictures, stickers and the habit's favourites together.
    labels_per_hour: int = Field(default=30, ge=0, le=10_000)
    # How long a turn waits for its own pictures and voices before going on without them.
    sight_wait_s: float = Field(default=8.0, ge=0, le=60)
    # A person's sticker becomes a fact about them after this many uses in one group.
    habit_threshold: int = Field(default=5, ge=2, le=1_000)
    # A sticker becomes one the bot may send after this many uses in a group, by anyone.
    collect_threshold: int = Field(default=3, ge=1, le=1_000)
    sticker_replies: bool = True  # a reply's sticker intent becomes a sticker
    voice_replies: bool = True  # answer a voice by voice when a `tts` model is registered
    tts_voice: str = Field(default="alloy", min_length=1, max_length=64)


class MediaKeys(BaseModel):
    """Media's keys of config/agent.yml (its `Extension.config`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    media: MediaConfig = Field(default_factory=MediaConfig)
