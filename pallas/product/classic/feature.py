"""Learned lines as one feature (docs/classic.md): its stage before the gate, its commands,
its per-group section and its own tables."""

from __future__ import annotations

from pallas.product.classic.commands import BansCommand, LearnedCommand, OptOutCommand
from pallas.product.classic.console import LEARNED_PAGE, learned_routes
from pallas.product.classic.learning import Learning
from pallas.product.classic.settings import classic_section
from pallas.product.classic.stage import ClassicParts, ClassicStage
from pallas.product.classic.store import LearnedStore
from pallas.product.conversation.commands import Audience
from pallas.product.extensions import Extension, Plugs


def install(plugs: Plugs) -> None:
    core = plugs.core
    section = classic_section(core.settings_table)
    plugs.add_section(section)
    store = LearnedStore(core.engine)
    learning = Learning(store)
    plugs.add_stage(ClassicStage(ClassicParts(core, store, learning)), before="gate")
    plugs.add_lifespan(learning.start, learning.stop, name="learned lines")
    plugs.add_command(LearnedCommand(store, learning), Audience.ADMIN)
    plugs.add_command(BansCommand(store, learning), Audience.ADMIN)
    plugs.add_command(OptOutCommand(store, core.clock), Audience.MEMBER)
    plugs.add_api_routes(learned_routes(store, learning, core.clock))
    plugs.add_owner_page(LEARNED_PAGE)


EXTENSION = Extension(
    name="classic",
    install=install,
    summary="从群里学怎么接话，不用模型；回复「不可以」就不再说",
)
