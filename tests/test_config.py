from __future__ import annotations

from pathlib import Path

import pytest

from pallas.config import ConfigError, load_settings


def test_defaults_match_the_contract() -> None:
    settings = load_settings(env_file=None)
    assert (settings.host, settings.port) == ("127.0.0.1", 8080)
    assert settings.nickname == ["牛牛"]
    assert settings.superusers == []
    assert settings.pallas_data_dir == Path("data")
    assert settings.database_url.startswith("sqlite+aiosqlite:///")
    assert settings.database_url.endswith("data/pallas.db")
    assert settings.model_chat_enabled is False


def test_env_file_values_and_json_lists(tmp_path: Path) -> None:
    env = tmp_path / ".env"
    env.write_text(
        'SUPERUSERS=[12345, "678"]\nNICKNAME=["小帕", " "]\nPORT=9090\n'
        "PALLAS_BLOCKED_USERS=[666]\n",
        encoding="utf-8",
    )
    settings = load_settings(env_file=env)
    assert settings.superusers == ["12345", "678"]
    assert settings.pallas_blocked_users == ["666"]
    assert settings.nickname == ["小帕"]
    assert settings.port == 9090


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        ({"port": "eighty"}, "PORT"),
        ({"port": 70000}, "PORT"),
        ({"nickname": []}, "NICKNAME"),
        ({"pallas_database_url": "mysql://localhost/x"}, "PALLAS_DATABASE_URL"),
        ({"host": "0.0.0.0"}, "ONEBOT_ACCESS_TOKEN"),
        ({"llm_model": "deepseek-chat"}, "LLM_BASE_URL"),
        ({"pallas_retention_messages_days": 3}, "PALLAS_RETENTION_MESSAGES_DAYS"),
        ({"pallas_retention_call_log_days": -1}, "PALLAS_RETENTION_CALL_LOG_DAYS"),
        ({"pallas_trusted_proxies": ["nginx"]}, "PALLAS_TRUSTED_PROXIES"),
    ],
)
def test_bad_values_name_the_key(overrides: dict[str, object], key: str) -> None:
    with pytest.raises(ConfigError) as error:
        load_settings(env_file=None, **overrides)
    assert f"{key}:" in str(error.value)


@pytest.mark.parametrize("key", ["SUPERUSERS", "PALLAS_BLOCKED_USERS"])
def test_unparseable_list_names_the_key(tmp_path: Path, key: str) -> None:
    env = tmp_path / ".env"
    env.write_text(f"{key}=12345\n", encoding="utf-8")
    with pytest.raises(ConfigError) as error:
        load_settings(env_file=env)
    assert f"{key}:" in str(error.value)
    assert "a JSON list of QQ ids" in str(error.value)


@pytest.mark.parametrize(
    ("given", "effective"),
    [
        ("sqlite:///x.db", "sqlite+aiosqlite:///x.db"),
        ("postgres://u:p@h/db", "postgresql+asyncpg://u:p@h/db"),
        ("postgresql://u:p@h/db", "postgresql+asyncpg://u:p@h/db"),
        ("postgresql+asyncpg://u:p@h/db", "postgresql+asyncpg://u:p@h/db"),
    ],
)
def test_database_url_gets_the_async_driver(given: str, effective: str) -> None:
    assert load_settings(env_file=None, pallas_database_url=given).database_url == effective


def test_public_host_is_fine_with_a_token() -> None:
    settings = load_settings(env_file=None, host="0.0.0.0", onebot_access_token="s3cret")
    assert settings.host == "0.0.0.0"


def test_quick_model_config_turns_model_chat_on() -> None:
    settings = load_settings(env_file=None, llm_base_url="http://127.0.0.1:1/v1", llm_model="m")
    assert settings.model_chat_enabled is True


CONTRACT_KEYS = [
    "HOST",
    "PORT",
    "ONEBOT_ACCESS_TOKEN",
    "SUPERUSERS",
    "PALLAS_BLOCKED_USERS",
    "NICKNAME",
    "COMMAND_START",
    "COMMAND_SEP",
    "PALLAS_ACCOUNT_NAMES",
    "PALLAS_ACCOUNT_HANDOVER",
    "PALLAS_PROCESS_NAME",
    "PALLAS_PROCESS_LEASE_S",
    "PALLAS_DATA_DIR",
    "PALLAS_DATABASE_URL",
    "LLM_BASE_URL",
    "LLM_API_KEY",
    "LLM_MODEL",
    "PALLAS_PROVIDERS_FILE",
    "PALLAS_DAILY_BUDGET",
    "PALLAS_DAILY_TOKEN_BUDGET",
    "PALLAS_CONSOLE_TOKEN",
    "PALLAS_FEATURES_OFF",
    "PALLAS_FEATURE_MODULES",
    "PALLAS_TRUSTED_PROXIES",
    "PALLAS_MCP_FILE",
    "WEB_SEARCH_API_URL",
    "TAVILY_API_KEY",
    "PALLAS_SMTP_HOST",
    "PALLAS_SMTP_PORT",
    "PALLAS_SMTP_USER",
    "PALLAS_SMTP_PASSWORD",
    "PALLAS_SMTP_FROM",
    "PALLAS_SMTP_TO",
    "PALLAS_SMTP_STARTTLS",
    "PALLAS_RETENTION_MESSAGES_DAYS",
    "PALLAS_RETENTION_EVENTS_DAYS",
    "PALLAS_RETENTION_MODEL_CALLS_DAYS",
    "PALLAS_RETENTION_CALL_LOG_DAYS",
    "PALLAS_CLOCK_SHIFT_S",
]
ENV_EXAMPLE = Path(__file__).resolve().parents[1] / ".env.example"


def test_env_example_documents_every_key_with_its_default() -> None:
    lines = ENV_EXAMPLE.read_text(encoding="utf-8").splitlines()
    keys = [line.split("=", 1)[0] for line in lines if line and not line.startswith("#")]
    assert keys == CONTRACT_KEYS
    from_example = load_settings(env_file=ENV_EXAMPLE)
    assert from_example.model_dump() == load_settings(env_file=None).model_dump()
    assert from_example.model_chat_enabled is False


def test_command_keys_are_nonebots_json_lists() -> None:
    settings = load_settings(env_file=None, command_start=["/", ""], command_sep=["."])
    assert settings.command_start == ["/", ""] and settings.command_sep == ["."]
    assert load_settings(env_file=None).command_start == ["/"]


def test_exclusive_names_are_qq_ids_to_names() -> None:
    names = load_settings(env_file=None, pallas_account_names={" 10002 ": ["小二", " "]})
    assert names.pallas_account_names == {"10002": ["小二"]}
    with pytest.raises(ConfigError, match="PALLAS_ACCOUNT_NAMES"):
        load_settings(env_file=None, pallas_account_names={"小二": ["10002"]})
