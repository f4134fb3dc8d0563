"""The agent file: optional, every field defaulted, mistakes named."""

from __future__ import annotations

from pathlib import Path

import pytest

from pallas.config import ConfigError
from pallas.product.llm.agent.config import AgentConfig, load_agent_config

EXAMPLE = Path(__file__).resolve().parents[4] / "config" / "agent.example.yml"


def test_no_file_means_the_defaults(tmp_path: Path) -> None:
    assert load_agent_config(tmp_path / "absent.yml") == AgentConfig()


def test_the_shipped_example_is_valid_and_shows_the_defaults() -> None:
    assert load_agent_config(EXAMPLE) == AgentConfig()


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
