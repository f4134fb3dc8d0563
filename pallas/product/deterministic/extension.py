"""The deterministic responders as one feature: repeat, poke back, welcome and farewell
(docs/deterministic-plugins.md). They answer through the core's outbox and take their
stages' slots in the core's order."""

from __future__ import annotations

from pallas.product.deterministic.responders import (
    NoticeStage,
    PokeBackStage,
    RepeatStage,
    ResponderDeps,
)
from pallas.product.extensions import Extension, Plugs


def install(plugs: Plugs) -> None:
    core = plugs.core
    deps = ResponderDeps(
        engine=core.engine,
        sender=core.sender,
        outbox=core.outbox,
        action_ids=core.action_ids,
        clock=core.clock,
        data_dir=core.data_dir,
        names=core.names,
        features=core.features,
    )
    plugs.add_stage(PokeBackStage(deps))
    plugs.add_stage(NoticeStage(deps))
    plugs.add_stage(RepeatStage(deps))


EXTENSION = Extension(
    name="responders",
    install=install,
    summary="复读、戳回去、进群欢迎和退群送别",
)
