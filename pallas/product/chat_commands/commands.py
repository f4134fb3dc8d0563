"""The chat commands owners, admins and members use (docs/commands.md). Switches change the
settings registry's own sections (never a copy), so the console shows what a command did.

  状态                     everyone   what is on here, today's calls and cost, the last decisions
  为什么不理我             everyone   why their last message got no answer
  安静 [N 分钟] / 说话     admins     mute this group for N minutes / unmute it
  开启 / 关闭 <功能>       admins     switch a feature in this group

Features add their own (memory's 忘记我, persona's 人设 and 拉黑...) through the seam.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.inbound import StreamKind
from pallas.core.local_time import SHANGHAI
from pallas.product.chat_commands.plain import recent_lines, why_not
from pallas.product.conversation.commands import Audience, CommandCall, CommandStage
from pallas.product.settings.registry import SettingsError, SettingsRegistry
from pallas.product.spending import spent_words
from pallas.providers.budget import DailyBudget
from pallas.store.audit_trail import explain, last_said_before, recent_decisions
from pallas.store.llm_usage import chat_usage

MAX_MUTE_MINUTES = 24 * 60
DEFAULT_MUTE_MINUTES = 30
_MUTE = re.compile(r"^(-?\d+)\s*(?:分钟|min|m)?$")

# 功能 -> the settings it changes: (section, field, value when on, value when off).
MODEL_CHAT = "模型聊天"
FEATURES: dict[str, tuple[tuple[str, str, Any, Any], ...]] = {
    MODEL_CHAT: (("gate", "model_chat", True, False),),
    "插话": (("gate", "ambient_probability", None, 0.0),
             ("gate", "join_hot_conversations", None, False)),
    "复读": (("features", "repeat", True, False),),
    "欢迎": (("features", "notices", True, False),),
    "表情包": (("features", "stickers", True, False),),
    "记忆": (("features", "memory", True, False),),
}  # fmt: skip
NOT_YET = ("学说话", "学话")  # learned lines are not built yet


@dataclass
class ChatCommandDeps:
    engine: AsyncEngine
    registry: SettingsRegistry
    clock: Callable[[], datetime]
    chat_model: bool = True  # a chat model is configured: model chat can answer at all
    budget: DailyBudget | None = None  # the daily spending cap, when one is set


def _group_only(call: CommandCall) -> str | None:
    if call.stored.message.stream.kind is not StreamKind.GROUP:
        return "这个命令要在群里用。"
    return None


NO_MODEL_LINE = "但还没有设置聊天模型：模型聊天开着也不会回（主人在 .env 里设 LLM_MODEL）"


class StatusCommand:
    name = "状态"
    summary = "这个群里开着什么、今天调用了几次模型、花了多少、最近为什么回或不回"

    def __init__(self, deps: ChatCommandDeps) -> None:
        self._deps = deps

    async def run(self, call: CommandCall) -> str:
        deps, sid, now = self._deps, call.stored.stream_id, self._deps.clock()
        lines = []
        if call.stored.message.stream.kind is StreamKind.GROUP:
            lines += await self._switches(sid, now)
        start = now.astimezone(SHANGHAI).replace(hour=0, minute=0, second=0, microsecond=0)
        calls, cost = await chat_usage(deps.engine, sid, start)
        lines.append(f"今天在这里调用模型 {calls} 次，花费 {cost:.4f}")
        if deps.budget is not None:
            _day, spent = await deps.budget.today()
            lines.append(f"今天全部：{spent_words(spent, deps.budget.today_limits)}")
        recent = await recent_decisions(deps.engine, sid, 4)
        if recent:
            lines += ["最近的决定：", *recent_lines(recent)]
        return "\n".join(lines)

    async def _switches(self, sid: int, now: datetime) -> list[str]:
        gate = (await self._deps.registry.read("gate", str(sid))).values()
        features = (await self._deps.registry.read("features", str(sid))).values()
        muted = gate["muted_until"] and datetime.fromisoformat(gate["muted_until"]) > now
        on = [name for name, parts in FEATURES.items() if _is_on(parts, gate, features)]
        off = [name for name in FEATURES if name not in on]
        lines = [f"开着：{'、'.join(on) or '无'}", f"关着：{'、'.join(off) or '无'}"]
        if not self._deps.chat_model and MODEL_CHAT in on:
            lines.append(NO_MODEL_LINE)
        if muted:
            until = datetime.fromisoformat(gate["muted_until"]).astimezone(SHANGHAI)
            lines.insert(0, f"正在安静，到 {until:%H:%M}")
        return lines


def _is_on(parts: tuple[tuple[str, str, Any, Any], ...], gate: dict[str, Any],
           features: dict[str, Any]) -> bool:  # fmt: skip
    section, field, _on, off = parts[0]
    values = gate if section == "gate" else features
    return bool(values[field] != off)


class WhyNotCommand:
    name = "为什么不理我"
    summary = "看你上一句话为什么没得到回应"

    def __init__(self, deps: ChatCommandDeps) -> None:
        self._deps = deps

    async def run(self, call: CommandCall) -> str:
        stored, engine = call.stored, self._deps.engine
        before = await last_said_before(
            engine, stored.stream_id, stored.sender_person_id, stored.message_id
        )
        path = await explain(engine, before) if before is not None else None
        if path is None:
            return "你在这里还没说过别的话。"
        return why_not(path)


class MuteCommand:
    name = "安静"
    summary = f"让我在这个群安静一会儿：安静 N 分钟（最多 {MAX_MUTE_MINUTES}）"

    def __init__(self, deps: ChatCommandDeps) -> None:
        self._deps = deps

    async def run(self, call: CommandCall) -> str:
        refusal = _group_only(call)
        if refusal:
            return refusal
        minutes = mute_minutes(call.args)
        if isinstance(minutes, str):
            return minutes
        until = (self._deps.clock() + timedelta(minutes=minutes)).astimezone(SHANGHAI)
        await _change(self._deps, call, {"muted_until": until.isoformat()}, "gate")
        return f"好，我安静 {minutes} 分钟，到 {until:%H:%M}。想让我早点说话就发「/说话」。"


def mute_minutes(args: str) -> int | str:
    """The minutes asked for, or what to say instead (pure)."""
    if not args:
        return DEFAULT_MUTE_MINUTES
    match = _MUTE.match(args.strip())
    if match is None or int(match.group(1)) < 1:
        return "用法：/安静 N 分钟，N 是 1 到 1440 的整数。"
    minutes = int(match.group(1))
    if minutes > MAX_MUTE_MINUTES:
        return f"最多安静 {MAX_MUTE_MINUTES} 分钟（一天）。"
    return minutes


class UnmuteCommand:
    name = "说话"
    summary = "结束安静"

    def __init__(self, deps: ChatCommandDeps) -> None:
        self._deps = deps

    async def run(self, call: CommandCall) -> str:
        refusal = _group_only(call)
        if refusal:
            return refusal
        await _change(self._deps, call, {"muted_until": ""}, "gate")
        return "好，我又可以说话了。"


class SwitchCommand:
    summary_on = "在这个群打开一个功能：开启 <功能>"
    summary_off = "在这个群关掉一个功能：关闭 <功能>"

    def __init__(self, deps: ChatCommandDeps, on: bool) -> None:
        self._deps = deps
        self._on = on
        self.name = "开启" if on else "关闭"
        self.summary = (self.summary_on if on else self.summary_off) + f"（{'、'.join(FEATURES)}）"

    async def run(self, call: CommandCall) -> str:
        refusal = _group_only(call)
        if refusal:
            return refusal
        feature = call.args.strip()
        if feature in NOT_YET:
            return f"「{feature}」还没有这个功能。"
        parts = FEATURES.get(feature)
        if parts is None:
            return f"没有「{feature}」这个功能。可以{self.name}：{'、'.join(FEATURES)}。"
        for section, field, on_value, off_value in parts:
            value = off_value if not self._on else on_value
            if value is None:  # back to the default
                value = getattr(self._deps.registry.section(section).defaults, field)
            await _change(self._deps, call, {field: value}, section)
        return f"好，这个群的「{feature}」{'开' if self._on else '关'}了。"


async def _change(
    deps: ChatCommandDeps, call: CommandCall, changes: dict[str, Any], key: str
) -> None:
    try:
        await deps.registry.update(key, str(call.stored.stream_id), changes, deps.clock())
    except SettingsError as exc:  # the registry names the field; the chat hears why
        raise ValueError("；".join(exc.problems.values())) from None


def install_chat_commands(stage: CommandStage, deps: ChatCommandDeps) -> None:
    stage.register(StatusCommand(deps), Audience.MEMBER, ("status",))
    stage.register(WhyNotCommand(deps), Audience.MEMBER, ("为啥不理我",))
    stage.register(MuteCommand(deps), Audience.ADMIN, ("闭嘴",))
    stage.register(UnmuteCommand(deps), Audience.ADMIN)
    stage.register(SwitchCommand(deps, on=True), Audience.ADMIN, ("打开",))
    stage.register(SwitchCommand(deps, on=False), Audience.ADMIN, ("关掉",))
