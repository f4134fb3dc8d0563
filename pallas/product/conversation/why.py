"""`/why`: the owner quotes a message and asks why the bot did (or did not) answer it.

The answer is the message's audit trail read back (`pallas/store/audit_trail.py`), one line per
step, with the stable reason words docs/gating.md explains.
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.actions import Origin
from pallas.product.conversation.commands import CommandCall
from pallas.store.audit_trail import MessagePath, TrailEvent, TurnTrace, explain, message_id_for

USAGE = "用法：回复（引用）一条消息，发送 /why"
_STEP_NAMES = {
    "inbound": "收到",
    "stage_suppressed": "静默",
    "stage_handled": "已由其它环节回应",
    "stage_acted": "顺手做了",
    "stage_failed": "某环节出错",
    "gate_passed": "门控放行",
    "gate_dropped": "门控没有接",
    "turn_started": "开始一个回合",
    "context_assembled": "整理上下文",
    "tool_called": "用了工具",
    "reply_intent": "回复里带的意图",
    "sticker_missed": "想发表情包但没找到",
    "attack_noted": "记下一次冒犯",
    "follow_up_skipped": "私聊追问没有发",
    "promise_made": "记下答应主人的事",
    "promise_refused": "没有记下这个承诺",
    "agent_decided": "决定",
    "agent_failed": "没能做出决定",
    "model_unavailable": "模型不可用",
    "reply_queued": "回复已排队",
    "action_queued": "动作已排队",
    "action_refused": "动作发不出去",
    "turn_finished": "回合结束",
    "turn_failed": "回合出错",
    "turn_waiting": "等待更多消息",
    "turn_interrupted": "回合被重启打断",
    "delivered": "已送达",
    "delivery_retry": "发送重试",
    "delivery_failed": "发送失败",
    "delivery_expired": "太久没发出，已作废",
    "delivery_dropped": "让位给更新的回复",
    "delivery_recovered": "重启后核对发送",
}
# Which part of the bot an outbox row came from, for the trail.
ORIGIN_NAMES: dict[str, str] = {
    Origin.AGENT_REPLY: "聊天回复",
    Origin.PROACTIVE: "主动开口",
    Origin.COMMAND: "命令回答",
    Origin.RESPONDER: "固定回应",
    Origin.TASK: "定时任务",
    Origin.LEARNED: "学来的话",
    Origin.NOTICE: "给主人的通知",
}


class WhyCommand:
    name = "why"
    summary = "引用一条消息，看它经过了哪些环节、为什么回或不回"

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def run(self, call: CommandCall) -> str:
        quoted = call.stored.message.reply_to
        if quoted is None:
            return USAGE
        message_id = await message_id_for(self._engine, call.stored.stream_id, quoted)
        path = await explain(self._engine, message_id) if message_id is not None else None
        if path is None:
            return "这条消息不在记录里（可能是我加入之前或重启前很久的消息）。"
        return describe_path(path)


def describe_path(path: MessagePath) -> str:
    """The trail as short Chinese lines (pure)."""
    lines = [f"消息 #{path.message_id}：" + (" （已静默）" if path.suppressed else "")]
    lines += [_step(event) for event in path.events if event.kind != "inbound"]
    for action in path.actions:
        lines += _turn_lines(action, skip_stages=True)
    if path.turn is not None:
        lines += _turn_lines(path.turn, skip_stages=False)
    if len(lines) == 1:
        lines.append("还没有任何决定（可能正在处理）。")
    return "\n".join(lines)


def _turn_lines(turn: TurnTrace, *, skip_stages: bool) -> list[str]:
    steps = [e for e in turn.events if not (skip_stages and e.kind.startswith("stage_"))]
    lines = [f"回合/动作 {turn.turn_id}："] + [f"  {_step(e)}" for e in steps]
    sent = sum(1 for row in turn.outbox if row.status == "sent")
    if turn.outbox:
        names = (ORIGIN_NAMES.get(row.origin, row.origin) for row in turn.outbox)
        origins = "、".join(dict.fromkeys(names))
        lines.append(f"  发出 {sent}/{len(turn.outbox)} 条（{origins}）")
    return lines


def _step(event: TrailEvent) -> str:
    return f"- {step_line(event)}"


def step_line(event: TrailEvent) -> str:
    """One step of a trail in plain Chinese (pure); a silence says its reason."""
    name = _STEP_NAMES.get(event.kind, event.kind)
    line = f"{name}（{event.reason}）" if event.reason else name
    said = event.payload.get("reason") if event.kind == "agent_decided" else None
    return f"{line}：{said}" if isinstance(said, str) and said else line
