"""Summaries as one feature (docs/summaries.md): /总结 and /我错过了什么 for everyone, the
`chat.summarize` tool, and the daily digest an admin switches on with /日报. Off with
PALLAS_FEATURES_OFF=["summaries"]."""

from __future__ import annotations

from pallas.product.conversation.commands import Audience
from pallas.product.extensions import Extension, Plugs
from pallas.product.llm.tools.registry import FunctionPlugin
from pallas.product.summaries.commands import DigestCommand, MissedCommand, SummaryCommand
from pallas.product.summaries.digest import CHECK_KIND, TICK, TICK_KIND, AdminDelivery, DigestTick
from pallas.product.summaries.making import MAKE_KIND, SummaryMaking
from pallas.product.summaries.requests import SummaryRequests
from pallas.product.summaries.settings import SummaryKnobs, summaries_section
from pallas.product.summaries.tools import SummarizeTool

MAKE_TIMEOUT_S = 240.0  # a long window is several calls, within the job lease


def install(plugs: Plugs) -> None:
    core = plugs.core
    section = summaries_section(core.settings_table)
    plugs.add_section(section)
    knobs = plugs.settings_of(section, SummaryKnobs)
    change = plugs.settings_writer(section)
    admins = AdminDelivery(core.engine, core.sender, core.outbox, core.jobs, core.action_ids,
                           core.clock, change)  # fmt: skip
    making = SummaryMaking(core.engine, core.models, core.sender, core.action_ids,
                           (*core.bot_names, "机器人")[0], admins)  # fmt: skip
    plugs.add_job(MAKE_KIND, making, timeout_s=MAKE_TIMEOUT_S)
    plugs.add_job(CHECK_KIND, admins.check)
    plugs.add_job(TICK_KIND, DigestTick(core.engine, core.settings_table, core.jobs, core.clock))
    plugs.add_periodic_job(TICK)
    requests = SummaryRequests(core.engine, core.jobs, core.clock, knobs)
    plugs.add_command(SummaryCommand(requests), Audience.MEMBER)
    plugs.add_command(MissedCommand(requests), Audience.MEMBER)
    plugs.add_command(DigestCommand(knobs, change), Audience.ADMIN)
    plugs.add_tool_plugin(
        FunctionPlugin("summaries", "总结最近的聊天", common=(SummarizeTool(requests),))
    )


EXTENSION = Extension(
    name="summaries",
    install=install,
    summary="聊天总结：/总结、/我错过了什么，和每天定时的群日报",
)
