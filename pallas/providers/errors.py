"""What can go wrong with a model call, as types a caller can act on."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class FailureKind(StrEnum):
    TIMEOUT = "timeout"
    RATE_LIMITED = "rate_limited"
    SERVER_ERROR = "server_error"
    CONNECTION_ERROR = "connection_error"
    MALFORMED_RESPONSE = "malformed_response"
    CIRCUIT_OPEN = "circuit_open"
    AUTH_ERROR = "auth_error"
    BAD_REQUEST = "bad_request"

    @property
    def fails_over(self) -> bool:
        """Worth trying another model; a rejected request would be rejected there too."""
        return self not in {FailureKind.AUTH_ERROR, FailureKind.BAD_REQUEST}


@dataclass(frozen=True)
class AttemptFailure:
    model: str
    kind: FailureKind
    detail: str
    retry_after_s: float | None = None

    def __str__(self) -> str:
        return f"{self.model}: {self.kind.value} ({self.detail})"


class ProviderError(Exception):
    """Base of every error the model manager raises."""


class NoModelError(ProviderError):
    """No model is registered for what was asked."""


class ModelRejectedError(ProviderError):
    """The service refused the request itself (bad key, unknown model, bad request).

    Another model would not help: this is a configuration problem and is reported as one.
    """

    def __init__(self, failure: AttemptFailure, provider: str) -> None:
        self.failure = failure
        self.provider = provider
        super().__init__(
            f"model {failure.model} on provider {provider} rejected the request: "
            f"{failure.kind.value} ({failure.detail}); check its key, model id and base URL"
        )


class AllCandidatesFailedError(ProviderError):
    """Every model that could serve the call failed; `failures` holds each cause in order."""

    def __init__(self, failures: tuple[AttemptFailure, ...]) -> None:
        self.failures = failures
        causes = "; ".join(str(f) for f in failures) or "no candidate could be tried"
        super().__init__(f"all model candidates failed: {causes}")

    @property
    def timed_out(self) -> bool:
        return bool(self.failures) and all(f.kind is FailureKind.TIMEOUT for f in self.failures)
