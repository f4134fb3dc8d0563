"""The console's words for the bot's stable codes: job kinds and states, model types and call
purposes (the trail's own words are pallas/product/conversation/plain_trail.py). A code
without words reads as 其它; the code itself stays in the element's title."""

from __future__ import annotations

OTHER = "其它"

JOB_KINDS = {
    "memory.extract": "从聊天里记事",
    "memory.decay": "让旧记忆淡去",
    "media.fetch": "下载图片",
    "media.describe": "看图写说明",
    "stickers.habit_scan": "统计表情包习惯",
    "assets.prune": "清理用不到的文件",
    "persona.notify_owners": "通知主人",
    "persona.notify_check": "确认主人收到通知",
    "persona.promise_due": "到点兑现答应的事",
    "persona.promise_expire": "放下过期的承诺",
    "persona.follow_up": "私聊里接着问一句",
    "persona.fingerprint": "总结自己的说话习惯",
    "jobs.purge": "清理做完的任务",
    "retention.prune": "按保留期删旧数据",
}
JOB_STATES = {"pending": "等着", "running": "在做", "done": "做完了", "failed": "失败了"}
MODEL_TYPES = {
    "chat": "聊天",
    "tool": "调用工具",
    "vision": "看图",
    "embedding": "向量",
    "tts": "说话",
    "asr": "听写",
}
PURPOSES = {
    "decision": "决定怎么回",
    "reply": "写回复",
    "extraction": "记事",
    "summary": "总结",
    "embedding": "向量",
    "vision": "看图",
    "speech": "说话",
    "transcription": "听写",
    "tool": "工具",
    "other": OTHER,
}


def chat_key(key: str) -> str:
    """A cost report's conversation key (`group:<id>`, `private:<id>`, `none`) in words."""
    kind, _, number = key.partition(":")
    if kind == "group":
        return f"群 {number}"
    if kind == "private":
        return f"私聊 {number}"
    return "不属于哪个会话"


def word(words: dict[str, str], code: str) -> str:
    return words.get(code, OTHER)
