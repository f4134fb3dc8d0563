"""Reading numbers from untrusted text without surprises (pure).

Python's `int()` refuses strings past 4,300 digits with a `ValueError`, and `str.isdigit()`
admits characters `int()` cannot read ("²"). Here a string that is no number we can read is
None, never an exception.
"""

from __future__ import annotations

import sys

# The longest digit string int() reads (Python's guard against quadratic conversions).
READABLE_DIGITS = sys.int_info.default_max_str_digits
ID_DIGITS = 19  # 2**63 - 1 has 19 digits
PLATFORM_DIGITS = 20  # 2**64 has 20: no id, time or count from the platform is longer
MAX_DB_ID = 2**63 - 1  # the largest integer SQLite and PostgreSQL's BIGINT hold


def read_int(text: str, max_digits: int = READABLE_DIGITS) -> int | None:
    """A decimal integer in ASCII digits (an optional minus sign, surrounding spaces
    allowed) of at most `max_digits` digits; None for anything else."""
    stripped = text.strip()
    digits = stripped[1:] if stripped.startswith("-") else stripped
    if not 0 < len(digits) <= max_digits or not (digits.isascii() and digits.isdigit()):
        return None
    return int(stripped)


def json_int(literal: str) -> int | str:
    """For `json.loads(parse_int=...)`: an integer literal too long for int() stays text,
    which the reader then treats as no number, instead of failing the whole document."""
    number = read_int(literal)
    return literal if number is None else number


def read_db_id(text: str) -> int | None:
    """A row id the store can hold (0 to MAX_DB_ID), or None."""
    number = read_int(text, ID_DIGITS)
    return number if number is not None and 0 <= number <= MAX_DB_ID else None


def fits_platform(number: int) -> bool:
    """Whether an integer from the platform is one the store can keep (at most
    PLATFORM_DIGITS digits: ids go into 64-character columns, times into datetimes)."""
    return -(10**PLATFORM_DIGITS) < number < 10**PLATFORM_DIGITS
