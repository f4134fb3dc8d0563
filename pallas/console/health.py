"""The health report served at GET /pallas/api/health."""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel


class HealthReport(BaseModel):
    ok: bool
    bots: list[str]
    database: str
    model_chat: bool


def health_report(bot_ids: Iterable[str], database: str, model_chat: bool) -> HealthReport:
    return HealthReport(ok=True, bots=sorted(bot_ids), database=database, model_chat=model_chat)
