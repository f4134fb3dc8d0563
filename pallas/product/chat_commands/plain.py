"""A message's path, or a chat's recent decisions, in plain Chinese for the person who asked
(pure): the stable reason words of docs/gating.md, said the way a member would say them."""

from __future__ import annotations

from collections.abc import Sequence

from pallas.product.conversation.plain_trail import (
    FAILURE_WORDS,
    GATE_WORDS,
    OTHER,
    reason_words,
    stage_words,
)
from pallas.store.audit_trail import MessagePath, TrailEvent

REASONS = GATE_WORDS  # the gate's rules, said the way a member would say them
STEPS = {
    "gate_dropped": "没接",
    "turn_finished": "看过了",
    "stage_handled": "直接回应",
    "stage_suppressed": "静默",
}


def why_not(path: MessagePath) -> str:
    """Why the bot did (or did not) answer this message, in one or two sentences."""
    if path.suppressed:
        return "你那条消息被静默了：我记下了，但没有任何回应（可能是我在生气，或者你被拉黑了）。"
    dropped = next((e for e in path.events if e.kind == "gate_dropped"), None)
    if dropped is None and path.turn is not None:
        dropped = next((e for e in path.turn.events if e.kind == "gate_dropped"), None)
    if dropped is not None:
        return f"我没回你那句「{_short(path.text)}」：{_reason(dropped.reason)}。"
    if path.turn is None:
        handled = next((e for e in path.events if e.kind == "stage_handled"), None)
        if handled is not None:
            how = stage_words(handled.reason)
            return f"你那句「{_short(path.text)}」已经直接回应过了（{how}）。"
        return f"你那句「{_short(path.text)}」我还没处理完。"
    return _turn_words(path)


def _turn_words(path: MessagePath) -> str:
    assert path.turn is not None
    decided = next((e for e in path.turn.events if e.kind == "agent_decided"), None)
    said = f"你那句「{_short(path.text)}」"
    if decided is None:
        failed = next((e for e in path.turn.events if e.kind == "agent_failed"), None)
        why = FAILURE_WORDS.get(failed.reason, OTHER) if failed else ""
        return f"{said}我想回，但模型没能给出回答" + (f"（{why}）。" if why else "。")
    if decided.reason == "wait":
        return f"{said}我看到了，在等大家多说几句再回。"
    if decided.reason == "silent":
        return f"{said}我看过了，决定不接：{decided.payload.get('reason', '')}".rstrip("：") + "。"
    if any(row.status == "sent" for row in path.turn.outbox):
        return f"{said}我回过了呀。"
    return f"{said}我回了，但还没发出去（在排队或发送失败）。"


def recent_lines(events: Sequence[TrailEvent]) -> list[str]:
    """The chat's last decisions, newest first, one short line each."""
    return [f"- {STEPS.get(e.kind, '其它')}：{reason_words(e) or '没说原因'}" for e in events]


def _reason(word: str) -> str:
    return REASONS.get(word, OTHER)


def _short(text: str, limit: int = 20) -> str:
    return text if len(text) <= limit else text[:limit] + "…"
