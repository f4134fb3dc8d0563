"""Process-wide log hygiene: no single log line may carry a whole untrusted payload."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from loguru import logger

MAX_LOG_MESSAGE_CHARS = 2_000

Patcher = Callable[[Any], None]


def cap_message(record: Any) -> None:
    message = record["message"]
    if len(message) > MAX_LOG_MESSAGE_CHARS:
        record["message"] = (
            f"{message[:MAX_LOG_MESSAGE_CHARS]}… [log line cut, {len(message)} chars]"
        )


def install_log_guard(previous: Patcher | None = None) -> None:
    """Cap every log message (ours and NoneBot's per-event lines) at a fixed length.

    loguru holds one global patcher; `previous` (NoneBot's, which names records after
    plugins) keeps running first.
    """

    def patch(record: Any) -> None:
        if previous is not None:
            previous(record)
        cap_message(record)

    logger.configure(patcher=patch)
