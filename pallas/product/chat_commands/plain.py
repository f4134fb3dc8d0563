"""A message's path, or a chat's recent decisions, in plain Chinese for the person who asked
(pure): the stable reason words of docs/gating.md, said the way a member would say them."""

from __future__ import annotations

from collections.abc import Sequence

from pallas.store.audit_trail import MessagePath, TrailEvent

REASONS = {
    "attention_filtered": "那句话没有叫我（没 @、没叫名字、没回复我），我就没插嘴",
    "frequency_cap": "那会儿我说得太多了，先歇一歇",
    "asleep": "那会儿是我的睡觉时段",
    "chat_off": "这个群关掉了模型聊天",
    "muted": "群里让我安静了",
    "poke_flood": "戳得太多了，我就不理了",
    "buffer_overflow": "消息太多，我没看过来",
    "stale_at_restart": "我重启前的消息，等我回来已经过时了",
    "self_message": "那是我自己说的",
}
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
            return f"你那句「{_short(path.text)}」已经直接回应过了（{handled.reason}）。"
        return f"你那句「{_short(path.text)}」我还没处理完。"
    return _turn_words(path)


def _turn_words(path: MessagePath) -> str:
    assert path.turn is not None
    decided = next((e for e in path.turn.events if e.kind == "agent_decided"), None)
    said = f"你那句「{_short(path.text)}」"
    if decided is None:
        failed = next((e for e in path.turn.events if e.kind == "agent_failed"), None)
        return f"{said}我想回，但模型没能给出回答" + (f"（{failed.reason}）。" if failed else "。")
    if decided.reason == "silent":
        return f"{said}我看过了，决定不接：{decided.payload.get('reason', '')}".rstrip("：") + "。"
    if any(row.status == "sent" for row in path.turn.outbox):
        return f"{said}我回过了呀。"
    return f"{said}我回了，但还没发出去（在排队或发送失败）。"


def recent_lines(events: Sequence[TrailEvent]) -> list[str]:
    """The chat's last decisions, newest first, one short line each."""
    return [f"- {STEPS.get(e.kind, e.kind)}：{_reason(e.reason)}" for e in events]


def _reason(word: str) -> str:
    return REASONS.get(word, word or "没说原因")


def _short(text: str, limit: int = 20) -> str:
    return text if len(text) <= limit else text[:limit] + "…"
