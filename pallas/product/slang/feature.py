"""The group's own words as one feature (docs/slang.md): terms noticed in every extraction
run and learned through `slang.learn` in memory's after-turn call, their meanings shown when
a turn uses them, `slang.explain`, the samples of how the group answers for the call that
writes a reply, /黑话 and the console page 群里的说法. Off with PALLAS_FEATURES_OFF=["slang"];
per group on the console (设置 → 群里的说法)."""

from __future__ import annotations

from pallas.product.conversation.commands import Audience
from pallas.product.extensions import Extension, Plugs
from pallas.product.llm.tools.registry import FunctionPlugin
from pallas.product.settings.features import Feature
from pallas.product.slang.commands import SlangCommand
from pallas.product.slang.config import SlangKeys, SlangSwitches, slang_section
from pallas.product.slang.console import SLANG_PAGE, slang_routes
from pallas.product.slang.explaining import ExpressionSamples, SlangExplainTool, SlangMeanings
from pallas.product.slang.learning import SlangLearnTool
from pallas.product.slang.own_call import LEARN_KIND, OwnLearning, OwnLearningObserver
from pallas.product.slang.store import SlangStore

MEMORY_EXTRACT_KIND = "memory.extract"  # memory's job: where it runs, terms ride along


def install(plugs: Plugs) -> None:
    core, config = plugs.core, plugs.config.slang
    store = SlangStore(core.engine)
    section = slang_section(core.settings_table)
    plugs.add_section(section)
    switches = plugs.settings_of(section, SlangSwitches)
    learner = SlangLearnTool(core.engine, store, config, switches)
    plugs.add_extraction_tool(learner)
    _learn_without_memory(plugs, learner)
    plugs.add_context_source(SlangMeanings(core.engine, store, config))
    plugs.add_context_source(ExpressionSamples(store, config, switches))
    plugs.add_tool_plugin(
        FunctionPlugin("slang", "群里的说法：查黑话的意思", common=(SlangExplainTool(store),))
    )
    plugs.add_command(SlangCommand(store), Audience.MEMBER)
    plugs.add_api_routes(slang_routes(core.engine, store, core.clock))
    plugs.add_owner_page(SLANG_PAGE)


def _learn_without_memory(plugs: Plugs, learner: SlangLearnTool) -> None:
    """Where memory's extraction does not run, a learning run of the feature's own."""
    core = plugs.core
    memory_installed = core.jobs.handles(MEMORY_EXTRACT_KIND)  # memory installs first

    async def memory_rides(stream_id: int) -> bool:
        return memory_installed and await core.features.allows(stream_id, Feature.MEMORY)

    plugs.add_job(LEARN_KIND, OwnLearning(core.engine, core.models, learner, core.clock))
    delay = plugs.config.slang.learn_delay_s
    plugs.add_observer(OwnLearningObserver(core.jobs, memory_rides, delay))


EXTENSION = Extension(
    name="slang",
    install=install,
    summary="群里的说法：学群里的黑话和大家说话的样子，聊到时心里有数",
    config=SlangKeys,
)
