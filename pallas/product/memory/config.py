"""The memory's knobs (`memory:` in config/agent.yml); every field has a safe default."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class MemoryConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True  # extraction after turns, recall into the context, the memory tools
    # A chat's extraction runs this long after its turn; turns ending within the same half
    # minute share one run (and one model call): a line is read within delay + 30 s.
    extraction_delay_s: int = Field(default=15, ge=0, le=600)
    extraction_messages: int = Field(default=60, ge=5, le=400)  # newest read per run
    extraction_candidates: int = Field(default=30, ge=1, le=200)  # shown to the model
    recall_limit: int = Field(default=8, ge=0, le=40)  # entries shown per turn
    recall_window: int = Field(default=12, ge=1, le=100)  # recent lines: who is present
    behavior_limit: int = Field(default=10, ge=0, le=30)  # taught behaviours shown per turn
    embedding_timeout_s: float = Field(default=3.0, gt=0, le=30)


class MemoryKeys(BaseModel):
    """Memory's keys of config/agent.yml (its `Extension.config`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    memory: MemoryConfig = Field(default_factory=MemoryConfig)
