"""Welcome / farewell glue: greet joining members and see off leaving ones, where enabled."""

from __future__ import annotations

from nonebot import on_notice
from nonebot.adapters.onebot.v11 import Bot, NoticeEvent
from nonebot.plugin import PluginMetadata

from packages._runtime import current_runtime
from pallas.core.inbound import MemberChange
from pallas.platform.onebot.send import lookup_nickname, send_and_record
from pallas.platform.onebot.translate import translate_event
from pallas.product.deterministic.notices import (
    NOTICES_FILE,
    OFF,
    decide_notice,
    load_notices,
    render_notice,
)

__plugin_meta__ = PluginMetadata(
    name="notices",
    description="Welcome and farewell messages on member join / leave; off unless enabled.",
    usage=f"Per group, in PALLAS_DATA_DIR/{NOTICES_FILE}. See docs/deterministic-plugins.md.",
)

members = on_notice(priority=5, block=False)


@members.handle()
async def greet(bot: Bot, event: NoticeEvent) -> None:
    change = translate_event(event).event
    if not isinstance(change, MemberChange):
        return
    runtime = current_runtime()
    groups = load_notices(runtime.settings.pallas_data_dir / NOTICES_FILE)
    template = decide_notice(change, groups.get(change.stream.external_id, OFF))
    if template is None:
        return
    name = await lookup_nickname(bot, change.user_id) or change.user_id
    segments = render_notice(template, user_id=change.user_id, name=name)
    await send_and_record(bot, runtime.ingress, change.stream, segments)
