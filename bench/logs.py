"""The log lines a benchmark keeps: warnings and errors, held to be printed under the results."""

from __future__ import annotations

from loguru import logger

SHOWN = 5  # lines printed; the rest are counted


def capture_warnings() -> list[str]:
    """Replace every sink with one that keeps WARNING and above in the returned list."""
    logger.remove()
    logged: list[str] = []
    logger.add(lambda m: logged.append(str(m).rstrip()), level="WARNING")
    return logged


def print_logged(logged: list[str]) -> None:
    for line in logged[:SHOWN]:
        print(f"  [log] {line}")
    if len(logged) > SHOWN:
        print(f"  [log] ... {len(logged) - SHOWN} more warning/error line(s)")
