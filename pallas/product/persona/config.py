"""The rage knobs (`rage:` in config/agent.yml); every field has a safe default."""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

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
    # The model may say a turn's messages attacked it ([冒犯:…]); counts like a put-down.
    model_judgement: bool = True

    @property
    def judging(self) -> bool:
        """Whether the model's [冒犯:…] counts now: rage on, and the model's judgement too."""
        return self.enabled and self.model_judgement

    def policy(self) -> RagePolicy:
        return RagePolicy(
            threshold=self.threshold,
            half_life=timedelta(minutes=self.half_life_minutes),
            silence=timedelta(minutes=self.silence_minutes),
            escalate_within=timedelta(hours=self.escalate_within_hours),
        )


class FollowUpConfig(BaseModel):
    """`follow_up:` in config/agent.yml: one chance to speak again after a private reply."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    # The chance comes at a random moment in this range after the reply (minutes).
    min_minutes: float = Field(default=20.0, gt=0, le=7 * 24 * 60)
    max_minutes: float = Field(default=60.0, gt=0, le=7 * 24 * 60)
    # Also in the bot's sleeping hours (02:00-08:00 in its day, persona/routine.py).
    at_night: bool = False

    @field_validator("max_minutes")
    @classmethod
    def _ordered(cls, value: float, info: ValidationInfo) -> float:
        lower = info.data.get("min_minutes")
        if lower is not None and value < lower:
            # Shown to the owner as is, in the console and at start-up: in Chinese.
            raise ValueError(f"不能小于 min_minutes（{lower:g} 分钟）")
        return value


class PromiseConfig(BaseModel):
    """`promises:` in config/agent.yml: what the bot promises owners it will do."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    shown: int = Field(default=3, ge=1, le=20)  # open promises in the prompt, newest first
    # A promise with no time is forgotten after this many days.
    keep_days: float = Field(default=7.0, gt=0, le=365)


class PersonaKeys(BaseModel):
    """Persona's keys of config/agent.yml (its `Extension.config`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rage: RageConfig = Field(default_factory=RageConfig)
    follow_up: FollowUpConfig = Field(default_factory=FollowUpConfig)
    promises: PromiseConfig = Field(default_factory=PromiseConfig)
