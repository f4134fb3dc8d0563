"""The real bot process reads its models from the providers file at start-up."""

from __future__ import annotations

from pathlib import Path

from tests.support.bot_process import BotProcess

NO_TYPES = """
providers:
  - name: relay
    base_url: https://relay.example.invalid/v1
    api_key: sk-test
    models:
      - model: gpt-4o-mini
"""

TWO_MODELS = """
providers:
  - name: local
    base_url: http://127.0.0.1:9/v1
    models:
      - {name: talker, model: qwen3, types: [chat, tool], price: {input: 1, output: 2}}
      - {name: vectors, model: bge-m3, types: [embedding]}
"""

ONLY_EMBEDDING = """
providers:
  - name: local
    base_url: http://127.0.0.1:9/v1
    models:
      - {model: bge-m3, types: embedding}
"""


def providers_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "my-providers.yml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_model_without_types_stops_start_up_naming_file_model_and_field(
    tmp_path: Path,
) -> None:
    path = providers_file(tmp_path, NO_TYPES)
    bot = BotProcess(tmp_path / "bot", env={"PALLAS_PROVIDERS_FILE": str(path)})
    assert bot.run_to_exit() == 2
    output = bot.log()
    assert str(path) in output and "gpt-4o-mini" in output and "'types'" in output
    assert "Traceback" not in output


async def test_models_from_the_file_turn_model_chat_on(tmp_path: Path) -> None:
    path = providers_file(tmp_path, TWO_MODELS)
    bot = BotProcess(tmp_path / "bot", env={"PALLAS_PROVIDERS_FILE": str(path)})
    bot.start()
    try:
        health = await bot.wait_ready()
        assert health["model_chat"] is True
        assert "model chat is on (2 models from" in bot.log()
        assert "chat: talker" in bot.log() and "embedding: vectors" in bot.log()
        assert list((tmp_path / "bot" / "data" / "logs" / "llm").glob("llm-*.log"))
    finally:
        bot.stop()


async def test_without_a_chat_model_model_chat_stays_off(tmp_path: Path) -> None:
    path = providers_file(tmp_path, ONLY_EMBEDDING)
    bot = BotProcess(tmp_path / "bot", env={"PALLAS_PROVIDERS_FILE": str(path)})
    bot.start()
    try:
        health = await bot.wait_ready()
        assert health["model_chat"] is False
        assert "model chat is off" in bot.log()
    finally:
        bot.stop()


def test_a_bad_agent_file_stops_start_up_naming_the_field(tmp_path: Path) -> None:
    bot = BotProcess(tmp_path / "bot")
    (tmp_path / "bot" / "config").mkdir(parents=True)
    (tmp_path / "bot" / "config" / "agent.yml").write_text("max_bubbles: 0\n", encoding="utf-8")
    assert bot.run_to_exit() == 2
    output = bot.log()
    assert "agent.yml" in output and "'max_bubbles'" in output
    assert "Traceback" not in output
