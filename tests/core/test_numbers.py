from __future__ import annotations

import json

import pytest

from pallas.core.numbers import (
    MAX_DB_ID,
    READABLE_DIGITS,
    fits_platform,
    json_int,
    read_db_id,
    read_int,
)


@pytest.mark.parametrize(
    ("text", "number"),
    [("42", 42), (" 42 ", 42), ("-7", -7), ("0", 0), ("9" * READABLE_DIGITS, int("9" * 4300))],
)
def test_decimal_strings_read(text: str, number: int) -> None:
    assert read_int(text) == number


@pytest.mark.parametrize(
    "text", ["", "-", " ", "1e3", "4.0", "²", "٣", "12a", "--1", "9" * 4_301, "9" * 100_000]
)
def test_anything_else_is_no_number_and_never_raises(text: str) -> None:
    assert read_int(text) is None


def test_a_digit_cap_of_our_own() -> None:
    assert read_int("1" * 20, max_digits=19) is None
    assert read_int("1" * 19, max_digits=19) == int("1" * 19)


def test_store_ids_fit_in_64_bits() -> None:
    assert read_db_id(str(MAX_DB_ID)) == MAX_DB_ID
    for text in (str(MAX_DB_ID + 1), "99999999999999999999999", "-1", "9" * 5_000, "x"):
        assert read_db_id(text) is None


def test_an_integer_literal_too_long_for_int_stays_text() -> None:
    document = '{"a": 1' + "0" * 5_000 + ', "b": 12}'
    with pytest.raises(ValueError):
        json.loads(document)
    read = json.loads(document, parse_int=json_int)
    assert read["b"] == 12 and isinstance(read["a"], str) and len(read["a"]) == 5_001


def test_platform_numbers_have_at_most_twenty_digits() -> None:
    assert fits_platform(2**64) and fits_platform(-(2**63)) and fits_platform(10**20 - 1)
    assert not fits_platform(10**20) and not fits_platform(-(10**30))
