"""Starting a research task, the same from the chat command and the model's tool: the
question checked, the limits held, the row and its job committed, the answer worded."""

from __future__ import annotations

from datetime import datetime

from pallas.product.conversation.jobs.registry import Jobs
from pallas.product.tasks.research import MAX_QUESTION, RESEARCH_KIND, research_key
from pallas.product.tasks.research_store import (
    MAX_RUNNING_PER_CHAT,
    MAX_RUNNING_PER_PERSON,
    STATUS_WORDS,
    Research,
    ResearchStore,
    TooManyResearch,
)
from pallas.product.tasks.setting import Asker
from pallas.product.tasks.when import Refused


async def start_research(
    store: ResearchStore, jobs: Jobs, asker: Asker, question: str, now: datetime
) -> int | Refused:
    words = " ".join(question.split())
    if not words:
        return Refused("要说查什么。")
    if len(words) > MAX_QUESTION:
        return Refused(f"问题太长了，最多 {MAX_QUESTION} 个字。")
    try:
        research_id = await store.start(asker.stream_id, asker.person_id, asker.user_id,
                                        asker.account, words, now)  # fmt: skip
    except TooManyResearch:
        return Refused(f"在查的事太多了：每人最多同时 {MAX_RUNNING_PER_PERSON} 件，每个聊天最多 "
                       f"{MAX_RUNNING_PER_CHAT} 件，等查完或者取消一件再来。")  # fmt: skip
    # A run cut off by a crash runs again (the answer's key keeps it to one message); a run
    # that failed says so itself and ends, so only crashes use the attempts.
    await jobs.enqueue(RESEARCH_KIND, {"research_id": research_id},
                       key=research_key(research_id), max_attempts=3)  # fmt: skip
    return research_id


def started_words(research_id: int) -> str:
    return (f"好，我去查了（#{research_id}），查完在这里告诉你。"
            f"/取消调研 {research_id} 可以取消。")  # fmt: skip


def research_line(research: Research) -> str:
    status = STATUS_WORDS.get(research.status, research.status)
    return f"#{research.id} {status}：{research.question}"
