"""The media knobs (`media:` in config/agent.yml) as the console's `media` section: the agent
file gives the defaults, the console changes them for the next message, no restart
(docs/media.md, docs/console.md)."""

from __future__ import annotations

from pallas.product.media.config import MediaConfig
from pallas.product.settings.applied import Live, applied_section
from pallas.product.settings.registry import Section
from pallas.store.settings_table import SettingsTable

MEDIA_TITLES = {
    "labels_per_hour": "每小时最多看几张图（识图模型调用）",
    "sight_wait_s": "回复前最多等图片和语音多少秒",
    "habit_threshold": "同一个表情在群里用几次算某人的爱用表情",
    "collect_threshold": "一个表情在群里被用几次就收藏",
    "sticker_replies": "用表情包回复",
    "voice_replies": "别人发语音时用语音回",
    "tts_voice": "语音用哪个声音",
}
MEDIA_HELPS = {
    "labels_per_hour": "图片、表情包和爱用表情一起算；0 就不看图",
    "sticker_replies": "关掉后只想发表情的回复改用文字说；每个群还有自己的开关",
    "voice_replies": "要在模型配置里有 tts 模型",
    "tts_voice": "语音服务认识的声音名字",
}


def media_section(table: SettingsTable, live: Live[MediaConfig]) -> Section:
    """The media knobs; media's parts read them through `live` where they act."""
    return applied_section("media", "图片、表情包和语音", table, live, MEDIA_TITLES, MEDIA_HELPS)
