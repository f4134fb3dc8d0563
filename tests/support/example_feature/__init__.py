"""A feature built only through the seam, the executable example of docs/architecture.md,
"Adding a feature": a stage, a chat command, a job, a settings section and a table of its
own, with its own migration. It counts how often the group says a word:

  a member says the word    -> the stage enqueues an `example.count` job (never waits)
  the job                   -> a row in `example_mention`
  /数一数                    -> "「<word>」说了 N 次"
  console section `example` -> the word, read where the stage acts (next message)
"""

from __future__ import annotations

from pathlib import Path

from pallas.product.conversation.commands import Audience
from pallas.product.extensions import Extension, Plugs
from pallas.store.migrate import Migrations
from tests.support.example_feature.parts import (
    COUNT_KIND,
    CountCommand,
    WordStage,
    count_job,
    example_section,
    lifespan,
)


def install(plugs: Plugs) -> None:
    section = example_section(plugs.core.settings_table)
    plugs.add_section(section)
    word_of = plugs.settings_of(section, section.model)
    plugs.add_stage(WordStage(plugs.core, word_of), before="gate")
    plugs.add_job(COUNT_KIND, count_job(plugs.core))
    plugs.add_command(CountCommand(plugs.core, word_of), Audience.MEMBER)
    start, stop = lifespan()
    plugs.add_lifespan(start, stop, name="example")


EXTENSION = Extension(
    name="example",
    install=install,
    summary="数一数群里说了几次某个词（示例功能）",
    migrations=Migrations(Path(__file__).parent / "migrations", "example_0001"),
)
