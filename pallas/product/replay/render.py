"""A replay's report as the owner reads it (Chinese), and as JSON for scripts."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from pallas.core.local_time import SHANGHAI
from pallas.product.replay.gate_replay import Tally
from pallas.product.replay.report import Estimate, ReplayReport

REASON_WORDS = {
    "frequency_cap": "频率上限",
    "attention_filtered": "没人找、也没抽中插话",
    "asleep": "睡觉时段",
    "muted": "被要求安静",
    "chat_off": "模型聊天关着",
    "poke_flood": "戳得太多",
    "self_message": "自己的消息",
}


def render(report: ReplayReport) -> str:
    chat, costs = report.chat, report.costs
    since = report.since.astimezone(SHANGHAI).strftime("%Y-%m-%d %H:%M")
    until = report.until.astimezone(SHANGHAI).strftime("%Y-%m-%d %H:%M")
    lines = [
        f"群 {chat.external_id}（{chat.name or '未命名'}，机器人 {chat.self_id}）",
        f"时间段：{since} 到 {until}（北京时间）",
        "",
        _tally_line("当时实际", report.recorded),
        _tally_line("按当时设置重放", report.in_force),
        f"  与实际一致：{report.agreed}/{report.in_force.gated} 条"
        + (f"（不一致的消息：{list(report.disagreeing)}）" if report.disagreeing else ""),
    ]
    if report.proposal is not None:
        changes = "，".join(f"{k}={v}" for k, v in report.proposed.items())
        lines.append(_tally_line(f"按提议设置（{changes}）", report.proposal))
    lines += [
        "",
        f"实际模型调用：{costs.calls} 次，{costs.tokens} tokens，花费 {costs.cost:.4f}（当时价格）",
        _estimate_line("按当时设置估算", report.in_force_estimate),
    ]
    if report.proposal_estimate is not None:
        lines.append(_estimate_line("按提议设置估算", report.proposal_estimate))
    lines += ["", _how_sure(report)]
    return "\n".join(lines)


def _tally_line(title: str, tally: Tally) -> str:
    dropped = "，".join(f"{REASON_WORDS.get(k, k)} {v}" for k, v in tally.dropped.items())
    return (
        f"{title}：{tally.gated} 条消息，被叫到 {tally.called} 次，自己开口 {tally.own} 次"
        + (f"；没理 {sum(tally.dropped.values())} 条（{dropped}）" if dropped else "")
    )


def _estimate_line(title: str, estimate: Estimate) -> str:
    cost = "算不出（没有可参照的调用）" if estimate.cost is None else f"{estimate.cost:.4f}"
    return f"{title}：约 {estimate.calls:.1f} 次调用，{estimate.tokens:.0f} tokens，花费 {cost}"


def _how_sure(report: ReplayReport) -> str:
    basis = (
        "每条放行的消息按 1 次调用算（那天没有放行的消息可参照）"
        if report.costs.per_pass is None
        else f"按那天每条放行消息 {report.costs.per_pass:.2f} 次调用"
    )
    return (
        "说明：门控的决定是精确重放的；模型部分是估算，"
        f"{basis}、每次调用的平均 tokens，按现在 providers 文件里的价格计。"
        "提议设置下，机器人自己说过的话仍按当时的算。"
    )


def as_json(report: ReplayReport) -> dict[str, Any]:
    data = asdict(report)
    data["since"], data["until"] = report.since.isoformat(), report.until.isoformat()
    data["exact"] = ["recorded", "in_force", "proposal"]
    data["estimated"] = ["in_force_estimate", "proposal_estimate"]
    return data
