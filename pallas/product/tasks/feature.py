"""Tasks as one feature (docs/tasks.md): reminders set from the chat, said when due; questions
looked up in the background, answered once."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from functools import partial

from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.inbound import StreamKind
from pallas.product.conversation.commands import Audience
from pallas.product.conversation.gate.policy import GatePolicy
from pallas.product.extensions import Extension, Plugs
from pallas.product.llm.tools.registry import FunctionPlugin
from pallas.product.tasks.commands import (
    CancelReminderCommand,
    CancelResearchCommand,
    RemindCommand,
    RemindersCommand,
    ResearchCommand,
)
from pallas.product.tasks.console import TASKS_PAGE, tasks_routes
from pallas.product.tasks.firing import REMIND_KIND, ReminderFiring
from pallas.product.tasks.research import RESEARCH_KIND, RUN_TIMEOUT_S, ResearchRunning
from pallas.product.tasks.research_store import ResearchStore
from pallas.product.tasks.setting import QuietHours
from pallas.product.tasks.store import ReminderStore
from pallas.product.tasks.tools import task_tools
from pallas.store.conversation import stream_key

RESEARCH_TIMEOUT_S = RUN_TIMEOUT_S + 30  # the run stops itself first, and says so
WEB_TOOLS = ("web.search", "web.fetch")


async def group_policy(
    engine: AsyncEngine,
    policy: Callable[[int, datetime], Awaitable[GatePolicy]],
    stream_id: int,
    now: datetime,
) -> GatePolicy | None:
    """A group's gate policy (its quiet hours); None for a private chat."""
    key = await stream_key(engine, stream_id)
    if key is None or key.kind != StreamKind.GROUP:
        return None
    return await policy(stream_id, now)


def install(plugs: Plugs) -> None:
    store, research = ReminderStore(plugs.core.engine), ResearchStore(plugs.core.engine)
    quiet = partial(group_policy, plugs.core.engine, plugs.core.gate_policy)
    _install_reminders(plugs, store, quiet)
    _install_research(plugs, research)
    tools = task_tools(store, research, plugs.core.jobs, plugs.core.clock, quiet)
    plugs.add_tool_plugin(FunctionPlugin("tasks", "提醒和后台查资料", common=tools))
    plugs.add_api_routes(tasks_routes(store, research, plugs.core.clock))
    plugs.add_owner_page(TASKS_PAGE)


def _install_reminders(plugs: Plugs, store: ReminderStore, quiet: QuietHours) -> None:
    core = plugs.core
    firing = ReminderFiring(store, core.jobs, core.sender, core.action_ids, core.clock,
                            core.engine)  # fmt: skip
    plugs.add_job(REMIND_KIND, firing)
    plugs.add_command(RemindCommand(store, core.jobs, core.clock, quiet), Audience.MEMBER)
    plugs.add_command(RemindersCommand(store), Audience.MEMBER)
    plugs.add_command(CancelReminderCommand(store, core.clock), Audience.MEMBER)


def _install_research(plugs: Plugs, research: ResearchStore) -> None:
    core = plugs.core
    web = plugs.tools_as_offered(WEB_TOOLS)  # as a turn has them: the owner's switches hold
    running = ResearchRunning(research, core.engine, core.models, core.sender, core.action_ids,
                              core.clock, web)  # fmt: skip
    plugs.add_job(RESEARCH_KIND, running, timeout_s=RESEARCH_TIMEOUT_S)
    plugs.add_command(ResearchCommand(research, core.jobs, core.clock), Audience.MEMBER)
    plugs.add_command(CancelResearchCommand(research, core.clock), Audience.MEMBER)


EXTENSION = Extension(
    name="tasks",
    install=install,
    summary="提醒（/提醒 20分钟后 喝水，到时候不用模型就说）和后台查资料（/调研 <问题>）",
)
