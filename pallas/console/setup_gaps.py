"""What the bot lacks to do what the owner expects, said where the owner looks (the overview
and the sandbox) with how to fix it (pure). An @ that gets no answer because no model is set
must never be a mystery."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pallas.console.tools_view import Switchable
from pallas.providers.catalog import Catalog, ModelType


@dataclass(frozen=True)
class Gap:
    what: str  # what does not work, in a sentence
    fix: str  # what to do about it


NO_MODEL = Gap(
    "还没有设置聊天模型：被 @ 了也不会回，沙盒里也一样。",
    "在 .env 里填好 LLM_BASE_URL、LLM_API_KEY、LLM_MODEL（或写 config/providers.yml），"
    "然后重启。",
)
FIX_TOOL = "补上它需要的设置后重启；或在工具页关掉它。"
TRY_SANDBOX = "打开「沙盒」，勾上「@ 机器人」说句话，看它怎么回、为什么这么回。"
NO_NAPCAT = Gap(
    "NapCat 还没有连上：QQ 里的消息进不来，也发不出去。",
    "在 NapCat 的网络设置里加一个 WebSocket 客户端（反向 WebSocket），地址 "
    "ws://<HOST>:<PORT>/onebot/v11/ws，消息格式选 array，令牌和 ONEBOT_ACCESS_TOKEN 一样。",
)
NO_PRICES = Gap(
    "模型都没有设价格：花费一律显示为「未设价格」。",
    "在 config/providers.yml 里给模型写 price: {input: …, output: …}（每百万 token 的价格）。",
)
NO_VISION = Gap(
    "没有看图的模型：群里的图片和表情包只记作「[图片]」，看不懂内容。",
    "在 config/providers.yml 里加一个 types 含 vision 的模型。",
)


def priced(catalog: Catalog) -> bool:
    """Whether some model has a price: a cost of 0 is then a real 0."""
    return any(m.pricing.input or m.pricing.output for m in catalog.models)


def setup_gaps(catalog: Catalog, bots: Iterable[str], tools: Sequence[Switchable]) -> list[Gap]:
    """Every gap, the most blocking first."""
    types = {kind for model in catalog.models for kind in model.types}
    gaps = [] if ModelType.CHAT in types else [NO_MODEL]
    if not list(bots):
        gaps.append(NO_NAPCAT)
    if catalog.models and not priced(catalog):
        gaps.append(NO_PRICES)
    if catalog.models and ModelType.VISION not in types:
        gaps.append(NO_VISION)
    gaps += [
        Gap(f"工具 {tool.name} 开着，但用不了：{tool.missing}。", FIX_TOOL)
        for tool in tools
        if tool.kind == "tool" and tool.enabled and tool.missing
    ]
    return gaps


@dataclass(frozen=True)
class Step:
    title: str
    how: str


def first_run(connected: bool, chat_model: bool, tried_sandbox: bool) -> list[Step]:
    """The first-run guide's steps still to do; none once each is done."""
    steps = [
        (connected, Step("连上 NapCat", NO_NAPCAT.fix)),
        (chat_model, Step("设置一个聊天模型", NO_MODEL.fix)),
        (tried_sandbox, Step("在沙盒里试一句", TRY_SANDBOX)),
    ]
    return [step for done, step in steps if not done]


def has_chat_model(catalog: Catalog) -> bool:
    return any(ModelType.CHAT in model.types for model in catalog.models)
