from __future__ import annotations

from pathlib import Path

import pytest

from pallas.config import load_settings
from pallas.providers.catalog import ModelType, Pricing
from pallas.providers.providers_file import (
    ProvidersFileError,
    load_catalog,
    read_providers_file,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "config" / "providers.example.yml"

GOOD = """
providers:
  - name: deepseek
    base_url: https://api.deepseek.com/v1/
    api_keys: [sk-one, sk-two]
    headers: {X-Trace: pallas}
    timeout: 45
    models:
      - name: ds-chat
        model: deepseek-chat
        types: [chat, tool]
        temperature: 0.7
        max_tokens: 800
        price: {input: 2, output: 8, cache_hit: 0.5}
  - name: local
    base_url: http://127.0.0.1:11434/v1
    models:
      - model: qwen3:8b
        type: chat
        tool_calling: false
        stream: true
      - model: bge-m3
        types: embedding
preferred:
  chat: ds-chat
circuit_breaker: {failures: 2, cooldown: 10}
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "providers.yml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_complete_file_becomes_a_catalog(tmp_path: Path) -> None:
    catalog = read_providers_file(write(tmp_path, GOOD))
    deepseek = catalog.provider("deepseek")
    assert deepseek.base_url == "https://api.deepseek.com/v1"
    assert deepseek.api_keys == ("sk-one", "sk-two")
    assert deepseek.headers == (("X-Trace", "pallas"),)
    assert deepseek.timeout_s == 45
    chat = catalog.model("ds-chat")
    assert chat is not None
    assert chat.types == {ModelType.CHAT, ModelType.TOOL}
    assert chat.pricing == Pricing(2, 8, 0.5)
    assert (chat.temperature, chat.max_tokens) == (0.7, 800)
    qwen = catalog.model("local/qwen3:8b")
    assert qwen is not None and not qwen.tool_calling and qwen.stream
    assert [m.name for m in catalog.of_type(ModelType.EMBEDDING)] == ["local/bge-m3"]
    assert catalog.preferred_for(ModelType.CHAT) == "ds-chat"
    assert catalog.breaker.failures_to_open == 2
    assert catalog.provider("local").api_keys == ("",)


def test_a_model_without_types_names_the_file_the_model_and_the_field(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
providers:
  - name: relay
    base_url: https://relay.example/v1
    models:
      - model: gpt-4o-mini
""",
    )
    with pytest.raises(ProvidersFileError) as caught:
        read_providers_file(path)
    message = str(caught.value)
    assert str(path) in message
    assert "gpt-4o-mini" in message and "'types'" in message
    assert "chat, tool, vision, embedding, tts, asr" in message


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("models:\n      - model: m\n        types: [chat, telepathy]\n", "'types.1'"),
        ("models:\n      - model: m\n        types: [chat]\n        colour: red\n", "'colour'"),
        ("models:\n      - model: m\n        types: []\n", "'types'"),
        ("timeout: -1\n", "'timeout'"),
        ("models:\n      - model: m\n        types: [chat]\n        price: {input: -1}\n", "price"),
    ],
)
def test_bad_fields_are_named(tmp_path: Path, body: str, expected: str) -> None:
    text = f"providers:\n  - name: p\n    base_url: https://x.example/v1\n    {body}"
    with pytest.raises(ProvidersFileError) as caught:
        read_providers_file(write(tmp_path, text))
    assert expected in str(caught.value)
    assert "provider 'p'" in str(caught.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("providers: [\n", "not valid YAML"),
        ("- just a list\n", "expected a mapping"),
        ("providers: []\n", "'providers'"),
        (
            "providers:\n  - name: p\n    base_url: ftp://x\n",
            "http:// or https://",
        ),
        (
            "providers:\n  - {name: p, base_url: 'http://a/v1', models: [{model: m, types: chat}]}"
            "\n  - {name: p, base_url: 'http://b/v1'}\n",
            "used twice",
        ),
        (
            "providers:\n  - name: p\n    base_url: http://a/v1\n    models:\n"
            "      - {model: m, types: chat}\n      - {model: m, types: chat}\n",
            "registered twice",
        ),
        (
            "providers:\n  - {name: p, base_url: 'http://a/v1', models: [{model: m, types: chat}]}"
            "\npreferred: {embedding: p/m}\n",
            "preferred.embedding",
        ),
    ],
)
def test_broken_files_say_why(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(ProvidersFileError) as caught:
        read_providers_file(write(tmp_path, text))
    assert expected in str(caught.value)


def test_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ProvidersFileError, match="cannot read"):
        read_providers_file(tmp_path / "nope.yml")


def test_quick_keys_make_one_chat_model() -> None:
    settings = load_settings(
        None, llm_base_url="https://api.example/v1/", llm_api_key="sk-q", llm_model="m-1"
    )
    catalog = load_catalog(settings)
    assert [m.name for m in catalog.of_type(ModelType.CHAT)] == ["m-1"]
    assert catalog.provider("quick").base_url == "https://api.example/v1"
    assert catalog.provider("quick").api_keys == ("sk-q",)


def test_quick_model_comes_before_the_file_models(tmp_path: Path) -> None:
    settings = load_settings(
        None,
        llm_base_url="https://api.example/v1",
        llm_model="m-1",
        pallas_providers_file=write(tmp_path, GOOD),
    )
    catalog = load_catalog(settings)
    assert [m.name for m in catalog.of_type(ModelType.CHAT)] == ["m-1", "ds-chat", "local/qwen3:8b"]


def test_no_configuration_means_no_models() -> None:
    assert load_catalog(load_settings(None, pallas_providers_file="")).empty


def test_the_shipped_example_is_valid_and_documents_every_field() -> None:
    catalog = read_providers_file(EXAMPLE)
    assert catalog.of_type(ModelType.CHAT)
    assert catalog.of_type(ModelType.EMBEDDING)
    text = EXAMPLE.read_text(encoding="utf-8")
    for field_name in (
        "base_url:", "api_key:", "api_keys:", "headers:", "timeout:", "models:", "name:",
        "model:", "types:", "temperature:", "max_tokens:", "tool_calling:", "stream:",
        "price:", "input:", "output:", "cache_hit:", "preferred:", "circuit_breaker:",
        "failures:", "cooldown:",
    ):  # fmt: skip
        assert field_name in text, field_name
