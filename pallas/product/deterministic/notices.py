"""Welcome and farewell notices: off unless a group's owner turns them on.

Settings live in `PALLAS_DATA_DIR/notices.json`, keyed by group id:

    {"123456": {"welcome": "欢迎 {at}！", "farewell": true}}

A string is the template; `true` uses the default template; `false` or a missing key is off.
Templates may use {at} (an @-mention of the member), {name} and {user_id}.
"""

from __future__ import annotations

import json
from pathlib import Path

from loguru import logger
from pydantic import BaseModel, ConfigDict, RootModel, field_validator

from pallas.core.inbound import MemberChange, Segment, SegmentKind
from pallas.core.text import excerpt

NOTICES_FILE = "notices.json"
DEFAULT_WELCOME = "欢迎 {at} 加入本群～"
DEFAULT_FAREWELL = "{name} 离开了本群，有缘再见。"


class GroupNotices(BaseModel):
    """One group's notice settings; everything off by default."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    welcome: str | bool = False
    farewell: str | bool = False

    @field_validator("welcome", "farewell")
    @classmethod
    def _blank_is_off(cls, value: str | bool) -> str | bool:
        return False if isinstance(value, str) and not value.strip() else value

    def template(self, *, joined: bool) -> str | None:
        value = self.welcome if joined else self.farewell
        if value is True:
            return DEFAULT_WELCOME if joined else DEFAULT_FAREWELL
        return value or None


OFF = GroupNotices()


class NoticesFile(RootModel[dict[str, GroupNotices]]):
    pass


def parse_notices(text: str) -> dict[str, GroupNotices]:
    """Parse the file's text; raises ValueError (pydantic's ValidationError is one)."""
    return NoticesFile.model_validate(json.loads(text)).root


def load_notices(path: Path) -> dict[str, GroupNotices]:
    """Read the file on each use, so an edit applies without a restart; missing means off."""
    try:
        return parse_notices(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:  # bad JSON or a bad value: say which, stay off
        logger.warning("{} ignored, notices stay off: {}", path, excerpt(str(exc), 300))
        return {}


def decide_notice(change: MemberChange, settings: GroupNotices) -> str | None:
    """The template to send for this join or leave, or None."""
    if change.user_id == change.stream.self_id:
        return None  # the bot joining or being removed is not news to greet
    if not change.joined and change.sub_type != "leave":
        return None  # a kick is the admins' business, not a farewell
    return settings.template(joined=change.joined)


def render_notice(template: str, *, user_id: str, name: str) -> tuple[Segment, ...]:
    """Template -> segments. {at} is split out first, so a name can never inject one."""
    segments: list[Segment] = []
    for index, part in enumerate(template.split("{at}")):
        if index:
            segments.append(Segment(SegmentKind.AT, text=f"@{name}", target=user_id))
        text = part.replace("{user_id}", user_id).replace("{name}", name)
        if text:
            segments.append(Segment(SegmentKind.TEXT, text=text))
    return tuple(segments)
