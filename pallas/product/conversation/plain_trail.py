"""The audit trail in plain Chinese, for the owner reading the console and the member asking
in the chat (pure). Every stable word of the trail (docs/architecture.md, "The audit trail")
has its sentence here; a word without one reads as 其它原因, and the word itself stays in the
folded details of the page, never in the sentence.
"""

from __future__ import annotations

from dataclasses import dataclass

from pallas.core.actions import Origin
from pallas.store.audit_trail import MessagePath, OutboxState, TrailEvent, TurnTrace

OTHER = "其它原因"

# The gate's rule, as why the bot stayed quiet or why it looked.
GATE_WORDS = {
    "attention_filtered": "这句话没有叫我，群里也没在跟我说话",
    "frequency_cap": "那会儿我说得太多了，先歇一歇",
    "asleep": "那会儿是我的睡觉时段",
    "chat_off": "这个群关掉了模型聊天",
    "muted": "群里让我安静了",
    "poke_flood": "戳得太多了，我就不理了",
    "buffer_overflow": "消息太多，我没看过来",
    "stale_at_restart": "这是我重启前的消息，等我回来已经过时了",
    "self_message": "那是我自己说的",
    "direct_conversation": "这是私聊，私聊我都会看",
    "mentioned": "被 @ 了",
    "attention": "有人在跟我说话",
    "ambient": "随手看了一眼群聊",
    "proactive": "我自己想起来要说",
}
SIGNAL_WORDS = {
    "mentioned": "被 @ 了",
    "called_by_name": "有人叫了我的名字",
    "replied_to_me": "有人回复了我的消息",
    "poked_me": "有人戳了我",
    "ongoing_exchange": "正在和我来回聊",
    "natural_window": "接着我刚说的话",
    "follow_up": "刚 @ 过我的人在接着说",
    "public_question": "有人在群里提问",
    "hot_conversation": "群里聊得正热",
}
FAILURE_WORDS = {
    "parse_error": "模型的回答看不懂",
    "illegal_action": "模型想做一件不允许的事",
    "timeout": "模型太久没回答",
    "provider_error": "模型服务出错了",
    "model_unavailable": "没有能用的聊天模型（看看模型设置）",
    "budget_reached": "今天的模型花费到上限了",
}
TURN_WORDS = {
    "done": "做完了",
    "silent": "决定不说话",
    "wait": "等更多消息再说",
    "retry": "重启后重新处理",
    "given_up": "重启后放弃了",
}
STATUS_WORDS = {
    "pending": "排队中",
    "sending": "正在发",
    "sent": "已送达",
    "failed": "发送失败",
    "unknown": "不确定发出去没有",
    "expired": "太久没发出，作废了",
    "dropped": "让位给更新的回复",
}
KIND_WORDS = {"message": "消息", "poke": "戳一戳", "react": "表情回应"}
# Which part of the bot an outbox row came from.
ORIGIN_NAMES: dict[str, str] = {
    Origin.AGENT_REPLY: "聊天回复",
    Origin.PROACTIVE: "主动开口",
    Origin.COMMAND: "命令回答",
    Origin.RESPONDER: "固定回应",
    Origin.TASK: "定时任务",
    Origin.LEARNED: "学来的话",
    Origin.NOTICE: "给主人的通知",
}
STAGE_WORDS = {
    "repeated": "跟着复读了",
    "poked_back": "戳了回去",
    "welcome": "欢迎新人",
    "farewell": "送别",
}
_COMMAND_ENDINGS = (
    ("_refused_again", "：没有权限（已经提醒过，不再回复）"),
    ("_refused", "：没有权限"),
    ("_flood", "：用得太频繁，没有理"),
)
# The step names of a trail, as the console's timeline and /why show them.
STEP_NAMES = {
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
    "delivery_handed_over": "原账号不在，换了个账号发",
    "outgoing_blocked": "内容不能发出去，拦下了",
    "outgoing_rewritten": "隐去了号码等内容再发",
    "inbound_duplicate": "又收到一次（重复的投递，没再处理）",
    "message_recalled": "被撤回了",
    "member_joined": "有人进群",
    "member_left": "有人退群",
    "group_notice": "群通知",
    "turn_competition": "这个群正有一轮在处理，等它结束",
}
DECISION_WORDS = {"reply": "回复", "silent": "不说话", "wait": "再等等", "react": "表情回应",
                  "poke": "戳一戳", "sticker": "发表情包"}  # fmt: skip


TRIGGER_WORDS = {
    "to_me": "在跟我说话",
    "followup": "接着刚才 @ 我的话",
    "alias": "开口就叫我",
    "mention": "提到了我",
    "ambient": "没人叫我，随便看看",
}
TOOL_WORDS = {"ok": "成功", "refused": "被拒绝", "failed": "失败", "timeout": "超时"}
RECOVERY_WORDS = {"confirmed": "确认发出去了", "resend": "重新发送", "unknown": "不确定，没有重发"}
DROP_WORDS = {"superseded": "有人直接叫我，先回那边", "queue_full": "排队的回复太多"}
# Which words an event's reason is read with, by the kind of event.
_WORDS_BY_KIND = {
    "gate_passed": GATE_WORDS,
    "gate_dropped": GATE_WORDS,
    "turn_started": GATE_WORDS,
    "agent_failed": FAILURE_WORDS,
    "agent_decided": DECISION_WORDS,
    "turn_finished": TURN_WORDS,
    "turn_interrupted": TURN_WORDS,
    "context_assembled": TRIGGER_WORDS,
    "tool_called": TOOL_WORDS,
    "delivered": KIND_WORDS,
    "delivery_retry": KIND_WORDS,
    "delivery_failed": KIND_WORDS,
    "delivery_expired": KIND_WORDS,
    "action_queued": KIND_WORDS,
    "action_refused": KIND_WORDS,
    "delivery_recovered": RECOVERY_WORDS,
    "delivery_dropped": DROP_WORDS,
}
_STAGE_KINDS = ("stage_handled", "stage_acted", "stage_suppressed")


@dataclass(frozen=True)
class TurnCost:
    """What a turn spent on the model."""

    calls: int
    cost: float
    priced: bool  # some model has a price set: a cost of 0 is then real


def stage_words(reason: str) -> str:
    """A stage's reason word: a command it answered, a repeat, a poke back..."""
    if reason in STAGE_WORDS:
        return STAGE_WORDS[reason]
    if reason.startswith("command_"):
        name = reason.removeprefix("command_")
        for ending, words in _COMMAND_ENDINGS:
            if name.endswith(ending):
                return f"命令 /{name.removesuffix(ending)}{words}"
        return f"回答了命令 /{name}"
    return OTHER


def reason_words(event: TrailEvent) -> str:
    """The Chinese for an event's reason word, by the kind of event it belongs to. A word of
    another kind of step is shown only when it is already words (a sticker's feeling)."""
    word = event.reason
    if event.kind in _STAGE_KINDS:
        return stage_words(word)
    words = _WORDS_BY_KIND.get(event.kind)
    if words is not None:
        return words.get(word, OTHER) if word else ""
    return "" if word.isascii() else word


def step_text(event: TrailEvent) -> str:
    """One step of a trail: its name, and its reason in words (a silence says why)."""
    name = STEP_NAMES.get(event.kind, "其它步骤")
    words = reason_words(event)
    line = f"{name}：{words}" if words else name
    said = event.payload.get("reason") if event.kind == "agent_decided" else None
    return f"{line}（{said}）" if isinstance(said, str) and said else line


def message_headline(path: MessagePath, cost: TurnCost | None = None) -> str:
    """What happened to a message and why, in one or two sentences."""
    if path.suppressed:
        return "静默了：记下了，但没有任何回应（可能我在生气，或者说话的人被拉黑了）。"
    dropped = _first(path.events, "gate_dropped") or _turn_event(path.turn, "gate_dropped")
    if dropped is not None:
        acted = _first(path.events, "stage_acted")  # a repeat or a poke back, no words
        done = f"（只是{stage_words(acted.reason)}）" if acted else ""
        return f"没理{done}：{GATE_WORDS.get(dropped.reason, OTHER)}。"
    if path.turn is None:
        handled = _first(path.events, "stage_handled")
        if handled is not None:
            return f"直接回应了：{stage_words(handled.reason)}。"
        return "还没有决定：可能正在处理。"
    passed = _first(path.events, "gate_passed")
    return turn_headline(path.turn, cost, because=_why_looked(passed))


def turn_headline(turn: TurnTrace, cost: TurnCost | None = None, because: str = "") -> str:
    """A turn's outcome: what the bot did, why it looked, what it spent, what arrived."""
    lead = f"{because}；" if because else ""
    spent = f"；{_spent(cost)}" if cost is not None and cost.calls else ""
    decided = _first(turn.events, "agent_decided")
    if decided is None and _first(turn.events, "turn_started") is None and turn.outbox:
        return f"{_origins(turn.outbox)}：{_arrived(turn.outbox)}。"  # a responder's action
    if decided is None:
        failed = _first(turn.events, "agent_failed")
        why = FAILURE_WORDS.get(failed.reason, OTHER) if failed else "还没有结果"
        return f"没回成：{lead}{why}{spent}。"
    if decided.reason == "silent":
        said = decided.payload.get("reason")
        return f"看过了，没接：{lead}{said or '模型决定不说话'}{spent}。"
    if decided.reason == "wait":
        return f"先等等，看大家还说什么：{lead}{spent.removeprefix('；')}。".replace("：。", "。")
    how = "" if decided.reason == "reply" else f"（{DECISION_WORDS.get(decided.reason, OTHER)}）"
    return f"回了{how}：{lead.rstrip('；')}{spent}；{_arrived(turn.outbox)}。".replace("：；", "：")


def _why_looked(passed: TrailEvent | None) -> str:
    if passed is None:
        return ""
    signals = [SIGNAL_WORDS[s] for s in passed.payload.get("signals", []) if s in SIGNAL_WORDS]
    if signals:
        return "、".join(dict.fromkeys(signals))
    return GATE_WORDS.get(passed.reason, "")


def _spent(cost: TurnCost) -> str:
    money = f"花费 {cost.cost:.4f}" if cost.cost or cost.priced else "未设价格"
    return f"用了 {cost.calls} 次模型，{money}"


def _arrived(rows: tuple[OutboxState, ...]) -> str:
    sent = sum(1 for row in rows if row.status == "sent")
    if not rows:
        return "没有要发的"
    if sent == len(rows):
        return f"{sent} 条都送达了" if sent > 1 else "送达了"
    return f"送达 {sent}/{len(rows)} 条"


def _origins(rows: tuple[OutboxState, ...]) -> str:
    return "、".join(dict.fromkeys(ORIGIN_NAMES.get(row.origin, OTHER) for row in rows))


def _first(events: tuple[TrailEvent, ...], kind: str) -> TrailEvent | None:
    return next((event for event in events if event.kind == kind), None)


def _turn_event(turn: TurnTrace | None, kind: str) -> TrailEvent | None:
    return None if turn is None else _first(turn.events, kind)
