"""The group's own words as one feature (docs/slang.md): terms noticed in every extraction
run and learned through `slang.learn` in memory's after-turn call, their meanings shown when
a turn uses them, `slang.explain`, the samples of how the group answers for the call that
writes a reply, /黑话 and the console page 群里的说法. Off with PALLAS_FEATURES_OFF=["slang"];
per group on the console (设置 → 群里的说法)."""

from __future__ import annotations

from pallas.product.conversation.commands import Audience
from pallas.product.extensions import Extension, Plugs
from pallas.product.llm.tools.registry import FunctionPlugin
from pallas.product.slang.commands import SlangCommand
from pallas.product.slang.config import SlangKeys, SlangSwitches, slang_section
from pallas.product.slang.console import SLANG_PAGE, slang_routes
from pallas.product.slang.explaining import ExpressionSamples, SlangExplainTool, SlangMeanings
from pallas.product.slang.learning import SlangLearnTool
from pallas.product.slang.store import SlangStore


def install(plugs: Plugs) -> None:
    core, config = plugs.core, plugs.config.slang
    store = SlangStore(core.engine)
    section = slang_section(core.settings_table)
    plugs.add_section(section)
    switches = plugs.settings_of(section, SlangSwitches)
    plugs.add_extraction_tool(SlangLearnTool(core.engine, store, config, switches))
    plugs.add_context_source(SlangMeanings(core.engine, store, config))
    plugs.add_context_source(ExpressionSamples(store, config, switches))
    plugs.add_tool_plugin(
        FunctionPlugin("slang", "群里的说法：查黑话的意思", common=(SlangExplainTool(store),))
    )
    plugs.add_command(SlangCommand(store), Audience.MEMBER)
    plugs.add_api_routes(slang_routes(core.engine, store, core.clock))
    plugs.add_owner_page(SLANG_PAGE)


EXTENSION = Extension(
    name="slang",
    install=install,
    summary="群里的说法：学群里的黑话和大家说话的样子，聊到时心里有数",
    config=SlangKeys,
)
