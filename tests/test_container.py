"""The container files (docs/deploy.md): no image can be built here, so the Dockerfile is
read as text and held to what it must do, and the compose file is parsed."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, its arguments), continuation lines joined, comments left out."""
    text = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    joined = re.sub(r"\\\n\s*", " ", text)
    found = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            found.append((word.upper(), rest.strip()))
    return found


def test_the_dockerfile_installs_with_the_readmes_command_and_starts_bot_py() -> None:
    steps = instructions()
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    install = re.search(r"(python -m pip install -e) \. && python bot\.py", readme)
    assert install is not None  # the README's own start command
    runs = [args for word, args in steps if word == "RUN"]
    assert any(install.group(1) + ' ".[postgres]"' in run for run in runs)
    [cmd] = [args for word, args in steps if word == "CMD"]
    assert shlex.split(cmd.strip("[]").replace(",", " ")) == ["python", "bot.py"]
    assert steps[0][0] == "FROM" and steps[0][1].startswith("python:3.11")


def test_it_runs_as_a_user_keeps_data_in_a_volume_and_checks_its_health() -> None:
    steps = dict(instructions()[::-1])  # the first of each instruction wins
    assert steps["USER"] not in ("root", "0")
    assert "/data" in steps["VOLUME"]
    assert "/pallas/api/health" in steps["HEALTHCHECK"]
    env = " ".join(args for word, args in instructions() if word == "ENV")
    assert "HOST=0.0.0.0" in env and "PALLAS_DATA_DIR=/data" in env
    assert "ONEBOT_ACCESS_TOKEN" not in env  # no default token: without one it refuses to start


def test_the_compose_file_has_napcat_and_postgres_as_a_profile() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text(encoding="utf-8"))
    services = compose["services"]
    assert set(services) == {"pallas", "napcat", "postgres"}
    assert services["postgres"]["profiles"] == ["postgres"]
    assert "pallas-data:/data" in services["pallas"]["volumes"]
    assert all(port.startswith("127.0.0.1:") for s in services.values()
               for port in s.get("ports", []))  # fmt: skip
