"""The agent file: optional, every field defaulted, mistakes named."""

from __future__ import annotations

from pathlib import Path

import pytest

from pallas.config import ConfigError
from pallas.features import BUILT_IN_FEATURES
from pallas.product.extensions import config_models
from pallas.product.llm.agent.config import AgentConfig, AgentFile, load_agent_config

EXAMPLE = Path(__file__).resolve().parents[4] / "config" / "agent.example.yml"


def test_no_file_means_the_defaults(tmp_path: Path) -> None:
    assert load_agent_config(tmp_path / "absent.yml") == AgentConfig()


def test_the_shipped_example_is_valid_and_shows_the_defaults() -> None:
    models = config_models(BUILT_IN_FEATURES)
    agent_file = AgentFile.read(EXAMPLE)
    assert agent_file.core(models) == AgentConfig()
    assert [agent_file.part(model) for model in models] == [model() for model in models]


def test_each_feature_reads_its_own_keys_and_a_key_nobody_owns_is_named(tmp_path: Path) -> None:
    path = tmp_path / "agent.yml"
    path.write_text("memory:\n  recall_limit: 3\nmax_bubbles: 2\nmemroy: {}\n", "utf-8")
    memory_keys = next(e.config for e in BUILT_IN_FEATURES if e.name == "memory")
    agent_file = AgentFile.read(path)
    assert agent_file.part(memory_keys).memory.recall_limit == 3
    with pytest.raises(ConfigError) as caught:
        agent_file.core(config_models(BUILT_IN_FEATURES))
    assert "'memroy'" in str(caught.value) and "'memory'" not in str(caught.value)


def test_a_file_overrides_what_it_names(tmp_path: Path) -> None:
    path = tmp_path / "agent.yml"
    path.write_text("persona:\n  name: 小帕\nsplit_reply: true\nmax_bubbles: 2\n", "utf-8")
    config = load_agent_config(path)
    assert (config.persona.name, config.split_reply, config.max_bubbles) == ("小帕", True, 2)
    assert config.persona.style == AgentConfig().persona.style


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("max_bubbles: 0\n", "'max_bubbles'"),
        ("persona:\n  nmae: x\n", "'persona.nmae'"),
        ("split_reply: maybe\n", "'split_reply'"),
        ("[1, 2]\n", "expected a mapping"),
        ("a: [\n", "cannot read"),
    ],
)
def test_mistakes_stop_start_up_naming_the_field(tmp_path: Path, text: str, named: str) -> None:
    path = tmp_path / "agent.yml"
    path.write_text(text, "utf-8")
    with pytest.raises(ConfigError) as caught:
        load_agent_config(path)
    assert str(path) in str(caught.value) and named in str(caught.value)
