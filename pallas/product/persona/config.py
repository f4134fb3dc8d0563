"""The rage knobs (`rage:` in config/agent.yml); every field has a safe default."""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel, ConfigDict, Field

from pallas.product.persona.rage import RagePolicy


class RageConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True  # attacks noticed, rage silences and the automatic blacklist
    threshold: float = Field(default=8.0, gt=0, le=100)  # an insult adds 4, a put-down 2
    half_life_minutes: float = Field(default=20.0, gt=0, le=24 * 60)
    silence_minutes: float = Field(default=30.0, gt=0, le=7 * 24 * 60)
    # The second silence within this many hours puts the person on the group's blacklist.
    escalate_within_hours: float = Field(default=24.0, gt=0, le=24 * 30)
    # How long the owners' private message has to be sent before e-mail is tried.
    notify_check_s: float = Field(default=120.0, ge=1, le=24 * 3600)

    def policy(self) -> RagePolicy:
        return RagePolicy(
            threshold=self.threshold,
            half_life=timedelta(minutes=self.half_life_minutes),
            silence=timedelta(minutes=self.silence_minutes),
            escalate_within=timedelta(hours=self.escalate_within_hours),
        )
