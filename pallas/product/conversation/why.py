"""`/why`: the owner quotes a message and asks why the bot did (or did not) answer it.

The answer is the message's audit trail read back (`pallas/store/audit_trail.py`): what
happened in a sentence, then one line per step, in the words of `plain_trail.py`.
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.product.conversation.commands import CommandCall
from pallas.product.conversation.plain_trail import ORIGIN_NAMES, message_headline, step_text
from pallas.store.audit_trail import MessagePath, TrailEvent, TurnTrace, explain, message_id_for

USAGE = "用法：回复（引用）一条消息，发送 /why"


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
    """The trail as short Chinese lines (pure): what happened, then each step."""
    lines = [f"消息 #{path.message_id}：{message_headline(path)}"]
    lines += [_step(event) for event in path.events if event.kind != "inbound"]
    for action in path.actions:
        lines += _turn_lines(action, skip_stages=True)
    if path.turn is not None:
        lines += _turn_lines(path.turn, skip_stages=False)
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
    return f"- {step_text(event)}"
