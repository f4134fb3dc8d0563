"""Running one non-terminal tool call safely, and recording it.

    resolve the name (or `call`) -> offered and available? -> arguments valid? -> safety
    policy -> run with its timeout -> result capped and framed as data -> audit event

Every refusal is a readable sentence for the model (and the audit); nothing a tool does can
raise into the decision loop.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from loguru import logger

from pallas.product.llm.assembler.tools import CALL, Offer
from pallas.product.llm.tools.base import Tool, ToolContext, ToolError, ToolTag
from pallas.product.llm.tools.book import Snapshot, ToolBook
from pallas.product.llm.tools.registry import from_wire
from pallas.store.audit import EventKind
from pallas.store.ledger import LedgerEvent, LedgerWriter

MAX_RESULT_CHARS = 8_000
MAX_LOGGED_ARGS = 300


@dataclass(frozen=True)
class ToolRun:
    name: str
    ok: bool
    data: Any  # what goes back to the model
    reason: str = ""  # why it was refused or failed
    outcome: str = "ok"  # ok / refused / failed / timeout
    duration_ms: float = 0.0
    result_chars: int = 0
    activated: tuple[str, ...] = ()


@dataclass
class ToolLoopDeps:
    book: ToolBook
    ledger: LedgerWriter


@dataclass
class TurnTools:
    """This turn's offer and the switches it was built from; grows as tools are activated."""

    offer: Offer
    snapshot: Snapshot
    activated: set[str] = field(default_factory=set)


async def run_tool_call(
    wire: str,
    arguments: Mapping[str, Any] | None,
    turn_tools: TurnTools,
    context: ToolContext,
    deps: ToolLoopDeps,
) -> ToolRun:
    started = time.perf_counter()
    name, args, refusal = _resolve(wire, arguments, turn_tools, context, deps.book)
    if refusal is not None:
        run = ToolRun(name, False, {"拒绝": refusal}, refusal, "refused")
    else:
        run = await _execute(name, args, context, deps.book)
    run = _finish(run, started)
    _audit(run, args, context, deps.ledger)
    return run


def _resolve(
    wire: str,
    arguments: Mapping[str, Any] | None,
    turn_tools: TurnTools,
    context: ToolContext,
    book: ToolBook,
) -> tuple[str, dict[str, Any], str | None]:
    name = from_wire(wire)
    if arguments is None:
        return name, {}, f"{name} 的参数不是 JSON 对象"
    args = dict(arguments)
    via_call = name == CALL
    if via_call:
        if not turn_tools.offer.call_available:
            return name, args, "现在没有可以通过 call 调用的功能"
        name = str(args.get("name") or "")
        inner = args.get("arguments") or {}
        if isinstance(inner, str):  # the text protocol passes it as JSON text
            try:
                inner = json.loads(inner)
            except json.JSONDecodeError:
                return name, args, "call 的 arguments 不是合法的 JSON 对象"
        if not isinstance(inner, dict):
            return name, args, "call 的 arguments 应是一个对象"
        args = inner
    tool = book.registry.get(name)
    if tool is None:
        return name, args, f"未知的功能：{name or '（空）'}"
    if book.registry.is_rare(name) and not via_call:
        return name, args, f'{name} 是不常用功能，请用 call(name="{name}", arguments={{...}}) 调用'
    offered = name in turn_tools.offer.names() or name in turn_tools.activated or via_call
    candidate = book.candidate(tool, turn_tools.snapshot, context.conversation)
    if not candidate.availability.available:
        return name, args, f"功能 {name} 当前不可用：{candidate.availability.reason}"
    if not offered:
        return name, args, f"功能 {name} 这一轮没有提供；可以先用 tools.find 找一找"
    problem = _argument_problem(candidate.spec.parameters, args)
    if problem:
        return name, args, f"{name} 的参数不对：{problem}"
    return name, args, _safety_refusal(candidate.spec.tags, name, context)


def _argument_problem(schema: Mapping[str, Any], args: Mapping[str, Any]) -> str:
    try:
        validator = Draft202012Validator(schema)
        errors = sorted(validator.iter_errors(args), key=lambda e: list(e.path))
    except SchemaError as exc:  # the tool's own declaration is broken: our fault
        logger.error("tool schema invalid: {}", exc.message)
        return "这个功能的参数声明有误"
    return "；".join(
        f"{'.'.join(str(p) for p in e.path) or '参数'}: {e.message}" for e in errors[:3]
    )[:300]


def _safety_refusal(tags: frozenset[ToolTag], name: str, context: ToolContext) -> str | None:
    """Side effects that need confirmation run only for the owner."""
    if ToolTag.NEEDS_CONFIRMATION in tags and not context.conversation.asker_is_owner:
        return f"{name} 需要主人确认，这次不能执行"
    return None


async def _execute(
    name: str, args: dict[str, Any], context: ToolContext, book: ToolBook
) -> ToolRun:
    tool = book.registry.get(name)
    assert tool is not None
    return await run_tool(tool, args, context)


async def run_tool(tool: Tool, args: dict[str, Any], context: ToolContext) -> ToolRun:
    """One tool run within its timeout; a failure of any kind is a readable refusal, never an
    exception (a turn's loop, and work off the turn such as a research task)."""
    name = tool.spec.name
    try:
        async with asyncio.timeout(tool.spec.timeout_s):
            output = await tool.run(args, context)
    except TimeoutError:
        reason = f"{name} 超时了（{tool.spec.timeout_s:g} 秒）"
        return ToolRun(name, False, {"失败": reason}, reason, "timeout")
    except ToolError as exc:
        reason = str(exc)[:200] or f"{name} 没有结果"
        return ToolRun(name, False, {"失败": reason}, reason, "failed")
    except Exception as exc:  # a broken tool must not end the turn
        logger.opt(exception=exc).error("tool {} raised {!r}", name, exc)
        reason = f"{name} 出错了"
        return ToolRun(name, False, {"失败": reason}, reason, "failed")
    return ToolRun(name, True, output.data, activated=output.activated)


def _finish(run: ToolRun, started: float) -> ToolRun:
    text = json.dumps(run.data, ensure_ascii=False, default=str)
    data = run.data
    if len(text) > MAX_RESULT_CHARS:
        data = {"结果（已截断）": text[:MAX_RESULT_CHARS], "原长": len(text)}
    duration = (time.perf_counter() - started) * 1000
    return ToolRun(
        run.name,
        run.ok,
        data,
        run.reason,
        run.outcome,
        duration,
        len(text),
        run.activated,
    )


def _audit(
    run: ToolRun, args: Mapping[str, Any], context: ToolContext, ledger: LedgerWriter
) -> None:
    shown = json.dumps(args, ensure_ascii=False, default=str)
    ledger.record(
        LedgerEvent(
            kind=EventKind.TOOL_CALLED,
            stream_id=context.conversation.stream_id,
            reason=run.outcome,
            turn_id=context.turn_id,
            payload={
                "tool": run.name,
                "arguments": shown[:MAX_LOGGED_ARGS],
                "result_chars": run.result_chars,
                "duration_ms": round(run.duration_ms, 1),
                "refusal": run.reason,
                "activated": list(run.activated),
            },
        )
    )
