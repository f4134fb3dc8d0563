"""Tasks as one feature (docs/tasks.md): reminders set from the chat, said when due."""

from __future__ import annotations

from pallas.product.conversation.commands import Audience
from pallas.product.extensions import Extension, Plugs
from pallas.product.llm.tools.registry import FunctionPlugin
from pallas.product.tasks.commands import CancelReminderCommand, RemindCommand, RemindersCommand
from pallas.product.tasks.firing import REMIND_KIND, ReminderFiring
from pallas.product.tasks.store import ReminderStore
from pallas.product.tasks.tools import task_tools


def install(plugs: Plugs) -> None:
    core = plugs.core
    store = ReminderStore(core.engine)
    firing = ReminderFiring(store, core.jobs, core.sender, core.action_ids, core.clock,
                            core.engine)  # fmt: skip
    plugs.add_job(REMIND_KIND, firing)
    plugs.add_command(RemindCommand(store, core.jobs, core.clock), Audience.MEMBER)
    plugs.add_command(RemindersCommand(store), Audience.MEMBER)
    plugs.add_command(CancelReminderCommand(store, core.clock), Audience.MEMBER)
    plugs.add_tool_plugin(
        FunctionPlugin(
            "tasks", "提醒：到时间提醒提问的人", common=task_tools(store, core.jobs, core.clock)
        )
    )


EXTENSION = Extension(
    name="tasks",
    install=install,
    summary="提醒：/提醒 20分钟后 喝水，到时候不用模型就说",
)
