"""`python -m pallas doctor`: check what the bot needs, one finding per line as it is found,
and say in plain words what to fix (docs/console.md).

  .env (and the keys in it nothing reads) -> the providers file -> config/agent.yml
  -> the database and its migrations -> one tiny call per configured model, each within
  MODEL_TIMEOUT_S -> the running bot and NapCat's connection

Nothing is changed: the database is not migrated, no file is written. Exit code 0 when
nothing needs fixing (reminders, marked !, do not count), 1 otherwise.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.config import ConfigError, Settings, load_settings
from pallas.console.env_keys import known_keys, unknown_keys
from pallas.product.extensions import Extension, config_models, enabled
from pallas.product.llm.agent.config import AgentFile
from pallas.providers.catalog import Catalog, ModelSpec, ModelType
from pallas.providers.errors import (
    AllCandidatesFailedError,
    AttemptFailure,
    FailureKind,
    ModelRejectedError,
)
from pallas.providers.manager import ManagerDeps, ModelManager
from pallas.providers.openai_wire import ChatRequest
from pallas.providers.providers_file import QUICK_PROVIDER, load_catalog
from pallas.providers.results import CallTag, Purpose
from pallas.store.engine import backend_name, create_engine
from pallas.store.migrate import HEAD_REVISION, current_revision

MODEL_TIMEOUT_S = 10.0
BOT_TIMEOUT_S = 3.0
PROBE_GRACE_S = 2.0  # NapCat answers get_version_info in milliseconds when well
UNCHECKED_TYPES = frozenset({ModelType.TTS, ModelType.ASR})  # a call would cost audio


@dataclass(frozen=True)
class Finding:
    ok: bool
    what: str  # what was checked, and what was found
    fix: str = ""  # what to do, when not ok
    warn: bool = False  # a reminder: worth a look, nothing is broken (ok stays True)


def line_of(finding: Finding) -> str:
    mark = "!" if finding.warn else "✓" if finding.ok else "✗"
    text = f"{mark} {finding.what}"
    return f"{text}\n    怎么办：{finding.fix}" if finding.fix else text


Progress = Callable[[str], None]


def _quiet(line: str) -> None:
    return None


class Findings(list[Finding]):
    """The findings so far; each is told to `progress` as it is made."""

    def __init__(self, progress: Progress) -> None:
        super().__init__()
        self.progress = progress

    def add(self, *found: Finding) -> None:
        for finding in found:
            self.append(finding)
            self.progress(line_of(finding))


async def examine(
    env_file: Path | str | None = ".env",
    features: Sequence[Extension] = (),
    progress: Progress = _quiet,
    timeout_s: float = MODEL_TIMEOUT_S,
) -> list[Finding]:
    """`features`: the built-in ones, whose keys of config/agent.yml are read too.
    `progress` hears each finding as it is made, and what a slow check is waiting for;
    `timeout_s` bounds each model's check."""
    findings = Findings(progress)
    try:
        settings = load_settings(env_file)
    except ConfigError as exc:
        findings.add(Finding(False, "配置（.env）有错", str(exc)))
        return list(findings)
    findings.add(*env_findings(env_file))
    catalog = _catalog(settings, findings)
    _agent_file(findings, features)
    await _features(settings, features, findings)
    findings.add(*await _database(settings))
    if catalog is not None:
        await _models(catalog, findings, timeout_s)
    progress("正在看机器人和 NapCat……")
    findings.add(*await _bot(settings))
    return list(findings)


def env_findings(env_file: Path | str | None, known: frozenset[str] | None = None) -> list[Finding]:
    """.env read, or missing; each key in it that nothing reads, with the key it may mean."""
    if env_file is None:
        return [Finding(True, "配置：只用环境变量和默认值")]
    path = Path(env_file)
    if not path.is_file():
        return [Finding(True, f"没有找到 {path}：用的是环境变量和默认值",
                        "cp .env.example .env，再按 README 填好（用环境变量配置的可以不管）",
                        warn=True)]  # fmt: skip
    found = [Finding(True, f"配置（{path}）读得懂")]
    for key, nearest in unknown_keys(path, known or known_keys()):
        meant = f"是不是想写 {nearest}？" if nearest else "README 的配置表里有全部的键。"
        found.append(Finding(True, f"{path} 里的 {key} 没有谁会读：它不起作用",
                             f"{meant}改好后重启", warn=True))  # fmt: skip
    return found


def _catalog(settings: Settings, findings: Findings) -> Catalog | None:
    try:
        catalog = load_catalog(settings)
    except ConfigError as exc:
        findings.add(Finding(False, "模型配置有错", str(exc)))
        return None
    if not catalog.of_type(ModelType.CHAT):
        findings.add(
            Finding(False, "没有配置聊天模型：机器人只记录，不聊天",
                    "在 .env 里填 LLM_BASE_URL、LLM_MODEL、LLM_API_KEY（docs/models.md）")
        )  # fmt: skip
    else:
        count = len(catalog.models)
        findings.add(Finding(True, f"模型配置：{count} 个模型（{catalog.source}）"))
    return catalog


def _agent_file(findings: Findings, features: Sequence[Extension]) -> None:
    try:
        agent_file = AgentFile.read()
        agent_file.core(config_models(features))
        for model in config_models(features):
            agent_file.part(model)
    except ConfigError as exc:
        findings.add(Finding(False, "config/agent.yml 有错", str(exc)))
        return
    findings.add(Finding(True, "config/agent.yml 读得懂（或没有，用默认值）"))


async def _features(
    settings: Settings, features: Sequence[Extension], findings: Findings
) -> None:
    """Each running feature's own checks (MCP's servers); a check that breaks says so."""
    for feature in enabled(features, settings):
        if feature.checks is None:
            continue
        try:
            found = await feature.checks(settings)
        except Exception as exc:  # a broken check must not end the report
            findings.add(Finding(False, f"功能 {feature.name} 的检查出错：{exc!r}"))
            continue
        findings.add(*(Finding(c.ok, c.what, c.fix, c.warn) for c in found))


async def _database(settings: Settings) -> list[Finding]:
    own_file = settings.pallas_data_dir / "pallas.db"
    if not settings.pallas_database_url and not own_file.exists():  # connecting would make it
        return [Finding(True, f"数据库还没有：第一次启动时会建在 {own_file}")]
    try:
        engine = create_engine(settings.database_url)
    except Exception as exc:
        return [Finding(False, f"数据库地址不对：{exc}", "检查 PALLAS_DATABASE_URL")]
    try:
        return [await _schema(engine)]
    except Exception as exc:
        return [Finding(False, f"连不上数据库（{backend_name(engine)}）：{exc!r}"[:300],
                        "检查 PALLAS_DATABASE_URL、数据库是否在运行、账号密码")]  # fmt: skip
    finally:
        await engine.dispose()


async def _schema(engine: AsyncEngine) -> Finding:
    async with engine.connect() as conn:
        revision = await conn.run_sync(current_revision)
    backend = backend_name(engine)
    if revision == HEAD_REVISION:
        return Finding(True, f"数据库（{backend}）可用，结构是最新的（{revision}）")
    if revision is None or revision < HEAD_REVISION:
        was = revision or "空库"
        return Finding(True, f"数据库（{backend}）可用；启动时会从 {was} 升级到 {HEAD_REVISION}")
    return Finding(False, f"数据库的结构（{revision}）比这份程序（{HEAD_REVISION}）新",
                   "用更新的程序版本，或换一个数据库")  # fmt: skip


async def _models(catalog: Catalog, findings: Findings, timeout_s: float) -> None:
    manager = ModelManager(catalog, ManagerDeps())
    for spec in catalog.models:
        findings.progress(f"正在试模型 {spec.name}（最多等 {timeout_s:g} 秒）……")
        findings.add(await _model(manager, catalog, spec, timeout_s))


async def _model(
    manager: ModelManager, catalog: Catalog, spec: ModelSpec, timeout_s: float
) -> Finding:
    types = "、".join(sorted(t.value for t in spec.types))
    if spec.types <= UNCHECKED_TYPES:
        return Finding(True, f"模型 {spec.name}（{types}）：语音模型不试调用")
    try:
        await asyncio.wait_for(_ping(manager, spec), timeout_s)
    except TimeoutError:
        return Finding(False, f"模型 {spec.name}（{types}）{timeout_s:g} 秒没有回答",
                       f"检查{_where(catalog, spec)}；服务是否在运行、网络是否通")  # fmt: skip
    except Exception as exc:
        return Finding(False, f"模型 {spec.name}（{types}）调用失败：{failure_words(exc)}"[:300],
                       f"检查{_where(catalog, spec)}")  # fmt: skip
    return Finding(True, f"模型 {spec.name}（{types}）能用")


FAILURE_WORDS = {
    FailureKind.AUTH_ERROR: "密钥不对或没有权限",
    FailureKind.BAD_REQUEST: "请求被拒绝（模型名不对？）",
    FailureKind.TIMEOUT: "超时",
    FailureKind.RATE_LIMITED: "被限流了",
    FailureKind.SERVER_ERROR: "服务出错了",
    FailureKind.CONNECTION_ERROR: "连不上",
    FailureKind.MALFORMED_RESPONSE: "回答看不懂",
    FailureKind.CIRCUIT_OPEN: "刚连续失败过，暂时不试",
}


def failure_words(exc: BaseException) -> str:
    """Why a model call failed, in words and with the service's own detail."""
    failures: tuple[AttemptFailure, ...] = ()
    if isinstance(exc, ModelRejectedError):
        failures = (exc.failure,)
    elif isinstance(exc, AllCandidatesFailedError):
        failures = exc.failures
    if not failures:
        return repr(exc)
    return "；".join(f"{FAILURE_WORDS.get(f.kind, f.kind.value)}（{f.detail}）" for f in failures)


def _where(catalog: Catalog, spec: ModelSpec) -> str:
    """The model's service in the owner's own words: the keys of .env for the quick model,
    the provider's name in the providers file otherwise."""
    if spec.provider == QUICK_PROVIDER:
        base = next((p.base_url for p in catalog.providers if p.name == spec.provider), "")
        return f" .env 里的 LLM_BASE_URL（{base}）、LLM_API_KEY 和 LLM_MODEL（{spec.upstream}）"
    return f" {catalog.source} 里 {spec.provider} 的地址和密钥，以及模型名 {spec.upstream}"


async def _ping(manager: ModelManager, spec: ModelSpec) -> None:
    tag = CallTag(Purpose.OTHER, stream_key="doctor")
    if ModelType.EMBEDDING in spec.types:
        await manager.embed(["ping"], tag=tag, model=spec.name)
        return
    request = ChatRequest(messages=[{"role": "user", "content": "ping"}], max_tokens=1)
    model_type = next(iter(spec.types - {ModelType.EMBEDDING} - UNCHECKED_TYPES))
    await manager.chat(request, tag=tag, model_type=model_type, model=spec.name)


async def _bot(settings: Settings) -> list[Finding]:
    host = "127.0.0.1" if settings.host in ("0.0.0.0", "::", "") else settings.host
    url = f"http://{host}:{settings.port}/pallas/api/health"
    try:
        health = await _health(url)
        if any(p.get("capabilities") is None for p in health.get("platforms", {}).values()):
            await asyncio.sleep(PROBE_GRACE_S)  # the first look started the probe
            health = await _health(url)
    except (httpx.HTTPError, ValueError):
        return [Finding(False, f"机器人没有在 {host}:{settings.port} 运行",
                        "先启动：python bot.py（要查 NapCat 的连接，机器人得在运行）")]  # fmt: skip
    bots = health.get("bots") or []
    if not bots:
        return [Finding(False, "机器人在运行，但 NapCat 没连上",
                        f"在 NapCat 的网络设置里加一个 WebSocket 客户端，地址 "
                        f"ws://{host}:{settings.port}/onebot/v11/ws，消息格式选 array，"
                        "令牌和 ONEBOT_ACCESS_TOKEN 一致（docs/napcat.md）")]  # fmt: skip
    platforms = health.get("platforms") or {}
    return [platform_finding(bot, platforms.get(bot) or {}) for bot in bots]


async def _health(url: str) -> dict[str, Any]:
    async with httpx.AsyncClient(timeout=BOT_TIMEOUT_S) as client:
        found = (await client.get(url)).json()
    if not isinstance(found, dict):
        raise ValueError("not a health report")
    return found


CAPABILITY_WORDS = {"poke": "戳一戳", "react": "表情回应"}


def platform_finding(bot: str, platform: dict[str, Any]) -> Finding:
    """One connected account: what runs behind it and what the bot may do there."""
    name = platform.get("implementation") or "未知的实现"
    capabilities = platform.get("capabilities")
    if capabilities is None:
        return Finding(False, f"NapCat 已连接：账号 {bot}，但它没回答 get_version_info",
                       "看一下 NapCat 的日志和版本；回答之前，戳一戳和表情回应不会用")  # fmt: skip
    if not capabilities:
        return Finding(True, f"NapCat 已连接：账号 {bot}（{name}）；这个实现不认识，"
                       "戳一戳和表情回应不会用")  # fmt: skip
    can = "、".join(CAPABILITY_WORDS.get(c, c) for c in capabilities)
    return Finding(True, f"NapCat 已连接：账号 {bot}（{name}），能用：{can}")


def report(findings: Sequence[Finding], out: Callable[[str], None] = print) -> int:
    for finding in findings:
        out(line_of(finding))
    return summary(findings, out)


def summary(findings: Sequence[Finding], out: Callable[[str], None] = print) -> int:
    """The closing line; the exit code (1 when something needs fixing)."""
    bad, reminders = sum(not f.ok for f in findings), sum(f.warn for f in findings)
    said = "都没问题" if not bad else f"有 {bad} 处要处理"
    out(f"{said}，另有 {reminders} 处提醒。" if reminders else f"{said}。")
    return 1 if bad else 0


def as_json(findings: Sequence[Finding]) -> dict[str, Any]:
    """For scripts: every finding, and whether anything needs fixing."""
    marks = [("warn" if f.warn else "ok" if f.ok else "problem") for f in findings]
    return {
        "ok": all(f.ok for f in findings),
        "findings": [
            {"status": mark, "what": f.what, "fix": f.fix}
            for mark, f in zip(marks, findings, strict=True)
        ],
    }
