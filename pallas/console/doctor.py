"""`python -m pallas doctor`: check what the bot needs, one finding per line, and say in plain
words what to fix (docs/console.md).

  .env -> the providers file -> config/agent.yml -> the database and its migrations
  -> one tiny call per configured model -> the running bot and NapCat's connection

Nothing is changed: the database is not migrated, no file is written. Exit code 0 when
everything is fine, 1 when something needs fixing.
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
from pallas.product.extensions import Extension, config_models
from pallas.product.llm.agent.config import AgentFile
from pallas.providers.catalog import Catalog, ModelSpec, ModelType
from pallas.providers.manager import ManagerDeps, ModelManager
from pallas.providers.openai_wire import ChatRequest
from pallas.providers.providers_file import load_catalog
from pallas.providers.results import CallTag, Purpose
from pallas.store.engine import backend_name, create_engine
from pallas.store.migrate import HEAD_REVISION, current_revision

MODEL_TIMEOUT_S = 20.0
BOT_TIMEOUT_S = 3.0
PROBE_GRACE_S = 2.0  # NapCat answers get_version_info in milliseconds when well
UNCHECKED_TYPES = frozenset({ModelType.TTS, ModelType.ASR})  # a call would cost audio


@dataclass(frozen=True)
class Finding:
    ok: bool
    what: str  # what was checked, and what was found
    fix: str = ""  # what to do, when not ok


def line_of(finding: Finding) -> str:
    mark = "✓" if finding.ok else "✗"
    text = f"{mark} {finding.what}"
    return f"{text}\n    怎么办：{finding.fix}" if finding.fix else text


async def examine(
    env_file: Path | str | None = ".env", features: Sequence[Extension] = ()
) -> list[Finding]:
    """`features`: the built-in ones, whose keys of config/agent.yml are read too."""
    try:
        settings = load_settings(env_file)
    except ConfigError as exc:
        return [Finding(False, "配置（.env）有错", str(exc))]
    findings = [Finding(True, "配置（.env）读得懂")]
    catalog = _catalog(settings, findings)
    _agent_file(findings, features)
    findings += await _database(settings)
    if catalog is not None:
        findings += await _models(catalog)
    findings += await _bot(settings)
    return findings


def _catalog(settings: Settings, findings: list[Finding]) -> Catalog | None:
    try:
        catalog = load_catalog(settings)
    except ConfigError as exc:
        findings.append(Finding(False, "模型配置有错", str(exc)))
        return None
    if not catalog.of_type(ModelType.CHAT):
        findings.append(
            Finding(False, "没有配置聊天模型：机器人只记录，不聊天",
                    "在 .env 里填 LLM_BASE_URL、LLM_MODEL、LLM_API_KEY（docs/models.md）")
        )  # fmt: skip
    else:
        count = len(catalog.models)
        findings.append(Finding(True, f"模型配置：{count} 个模型（{catalog.source}）"))
    return catalog


def _agent_file(findings: list[Finding], features: Sequence[Extension]) -> None:
    try:
        agent_file = AgentFile.read()
        agent_file.core(config_models(features))
        for model in config_models(features):
            agent_file.part(model)
    except ConfigError as exc:
        findings.append(Finding(False, "config/agent.yml 有错", str(exc)))
        return
    findings.append(Finding(True, "config/agent.yml 读得懂（或没有，用默认值）"))


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


async def _models(catalog: Catalog) -> list[Finding]:
    manager = ModelManager(catalog, ManagerDeps())
    return [await _model(manager, spec) for spec in catalog.models]


async def _model(manager: ModelManager, spec: ModelSpec) -> Finding:
    types = "、".join(sorted(t.value for t in spec.types))
    if spec.types <= UNCHECKED_TYPES:
        return Finding(True, f"模型 {spec.name}（{types}）：语音模型不试调用")
    try:
        await asyncio.wait_for(_ping(manager, spec), MODEL_TIMEOUT_S)
    except Exception as exc:
        return Finding(False, f"模型 {spec.name}（{types}）调用失败：{exc!r}"[:300],
                       f"检查 {spec.provider} 的地址、密钥和模型名 {spec.upstream}")  # fmt: skip
    return Finding(True, f"模型 {spec.name}（{types}）能用")


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
    bad = sum(not f.ok for f in findings)
    out("都没问题。" if not bad else f"有 {bad} 处要处理。")
    return 1 if bad else 0
