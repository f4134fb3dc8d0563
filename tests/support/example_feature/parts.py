"""The example feature's parts: its table, stage, job, command, settings and lifespan."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from loguru import logger
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import BigInteger, String, func, insert, select
from sqlalchemy.orm import Mapped, mapped_column

from pallas.core.text import typed_text
from pallas.product.conversation.commands import CommandCall
from pallas.product.conversation.ingress import CONTINUE, StageResult, StoredMessage
from pallas.product.extensions import CoreServices
from pallas.product.settings.features import TableStorage
from pallas.product.settings.registry import Scope, Section
from pallas.store.jobs import ClaimedJob
from pallas.store.schema_base import Base, Id, UtcDateTime
from pallas.store.settings_table import SettingsTable

COUNT_KIND = "example.count"


class ExampleMention(Base):
    """One time the word was said (the feature's own table, its own migration)."""

    __tablename__ = "example_mention"

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    stream_id: Mapped[int] = mapped_column(BigInteger, index=True)
    message_id: Mapped[int] = mapped_column(BigInteger, unique=True)
    word: Mapped[str] = mapped_column(String(32))
    counted_at: Mapped[datetime] = mapped_column(UtcDateTime(timezone=True))


class ExampleKnobs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    word: str = Field(default="小测试", min_length=1, max_length=32)


def example_section(table: SettingsTable) -> Section:
    return Section(
        key="example",
        title="示例：数一数",
        scope=Scope.GLOBAL,
        model=ExampleKnobs,
        defaults=ExampleKnobs(),
        storage=TableStorage("example", table),
        titles={"word": "要数的词"},
        applies="下一条消息生效",
    )


WordOf = Callable[[str], Awaitable[Any]]


class WordStage:
    """Hands a message with the word to the job; never decides anything itself."""

    name = "example"

    def __init__(self, core: CoreServices, word_of: WordOf) -> None:
        self._core = core
        self._word_of = word_of

    async def on_message(self, stored: StoredMessage) -> StageResult:
        word = (await self._word_of("global")).word
        if word in typed_text(stored.message.segments):
            payload = {"stream_id": stored.stream_id, "message_id": stored.message_id, "word": word}
            await self._core.jobs.enqueue(
                COUNT_KIND, payload, key=f"{COUNT_KIND}:{stored.message_id}"
            )
        return CONTINUE


def count_job(core: CoreServices) -> Callable[[ClaimedJob], Awaitable[None]]:
    async def run(job: ClaimedJob) -> None:
        row = {**job.payload, "counted_at": core.clock()}
        async with core.database.write() as conn:
            await conn.execute(insert(ExampleMention).values(**row))

    return run


class CountCommand:
    name = "数一数"
    summary = "示例功能：群里说了几次那个词"

    def __init__(self, core: CoreServices, word_of: WordOf) -> None:
        self._core = core
        self._word_of = word_of

    async def run(self, call: CommandCall) -> str:
        word = (await self._word_of("global")).word
        query = (
            select(func.count())
            .select_from(ExampleMention)
            .where(ExampleMention.stream_id == call.stored.stream_id, ExampleMention.word == word)
        )
        async with self._core.engine.connect() as conn:
            count = int((await conn.execute(query)).scalar_one())
        return f"「{word}」说了 {count} 次"


def lifespan() -> tuple[Callable[[], Awaitable[None]], Callable[[], Awaitable[None]]]:
    async def start() -> None:
        logger.info("example feature started")

    async def stop() -> None:
        logger.info("example feature stopped")

    return start, stop
