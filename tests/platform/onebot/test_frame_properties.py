"""Property-based tests of the OneBot frame boundary, for every frame the socket can carry.

The promise: a frame is either refused (FrameError, UnsupportedEventError) or read; either
way it costs at most two short warning lines, no traceback and no logging error; every
message whose envelope is readable is stored exactly once, in the right stream, with text
that is valid UTF-8; and NoneBot can log every event that is read.

Each example goes through the chain the running bot uses: the adapter's frame loop
(`read_event_frame`), `PallasBot.handle_event` (mentions, then the ingress plugin's hook with
a real `Ingress` and `TimelineWriter` on SQLite), then NoneBot's dispatch with no matchers.

The suite profile runs a bounded, derandomized number of examples. A long, randomized run:

    PALLAS_HYPOTHESIS_PROFILE=long python -m pytest tests/platform/onebot/test_frame_properties.py
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.support.frame_boundary import Boundary
from tests.support.frame_strategies import (
    Case,
    Deep,
    envelopes,
    expected_home,
    json_values,
    napcat_cases,
    salt_message_id,
    serialize,
)
from tests.support.napcat_corpus import corpus_frame

# -- profiles ------------------------------------------------------------------------------

_HEALTH_CHECKS = [
    HealthCheck.too_slow,
    HealthCheck.data_too_large,
    HealthCheck.filter_too_much,
    HealthCheck.function_scoped_fixture,  # one store per test, shared by its examples
]
settings.register_profile(
    "suite",
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=_HEALTH_CHECKS,
)
settings.register_profile(
    "long",
    max_examples=5000,
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=_HEALTH_CHECKS,
)
# Applied to each test below rather than loaded globally, so other modules keep their own.
PROFILE = settings.get_profile(os.environ.get("PALLAS_HYPOTHESIS_PROFILE", "suite"))

# -- the properties ------------------------------------------------------------------------


@PROFILE
@given(value=json_values, ascii_only=st.booleans(), as_bytes=st.booleans())
async def test_any_json_value_is_read_or_refused_within_bounds(
    boundary: Boundary, value: Any, ascii_only: bool, as_bytes: bool
) -> None:
    await boundary.check_frame(value, serialize(value, ascii_only=ascii_only, as_bytes=as_bytes))


@PROFILE
@given(data=st.one_of(st.binary(max_size=200), st.text(max_size=200)))
async def test_frames_that_are_not_json_are_refused_within_bounds(
    boundary: Boundary, data: str | bytes
) -> None:
    await boundary.check_frame(None, data)


@PROFILE
@given(frame=envelopes, ascii_only=st.booleans(), as_bytes=st.booleans())
async def test_envelopes_with_arbitrary_contents(
    boundary: Boundary, frame: dict[str, Any], ascii_only: bool, as_bytes: bool
) -> None:
    salt_message_id(frame)
    data = serialize(frame, ascii_only=ascii_only, as_bytes=as_bytes)
    await boundary.check_frame(frame, data, times=2)


@PROFILE
@given(case=napcat_cases(), ascii_only=st.booleans(), as_bytes=st.booleans())
async def test_damaged_napcat_frames(
    boundary: Boundary, case: Case, ascii_only: bool, as_bytes: bool
) -> None:
    frame = case.build()
    salt_message_id(frame)
    data = serialize(frame, ascii_only=ascii_only, as_bytes=as_bytes)
    for mutation in case.mutations:
        event(f"mutation: {mutation.action} {type(mutation.value).__name__}")
        if isinstance(mutation.value, Deep):
            event(f"deep: {'>=' if mutation.value.depth >= 1000 else '<'}1000 in {case.name[:7]}")
    event(f"envelope readable: {expected_home(frame) is not None}")
    first, _ = await boundary.check_frame(frame, data, times=2)
    event(f"outcome: {type(first.refused).__name__}")
    if not case.mutations:
        assert first.refused is None, f"an undamaged NapCat frame was refused: {case.name}"


# -- examples the properties found, kept as regressions -----------------------------------

_MISSING = object()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("raw_message", 5),
        ("raw_message", None),
        ("raw_message", ["CQ"]),
        ("raw_message", _MISSING),
        ("message", _MISSING),
    ],
    ids=["raw-int", "raw-null", "raw-list", "raw-missing", "message-missing"],
)
async def test_message_without_a_string_raw_message_or_a_message_is_kept(
    boundary: Boundary, field: str, value: Any
) -> None:
    """Both are required by the upstream MessageEvent; without them the message was lost."""
    frame = corpus_frame("message_group_text")
    if value is _MISSING:
        del frame[field]
    else:
        frame[field] = value
    salt_message_id(frame)
    await boundary.check_frame(frame, serialize(frame, ascii_only=True, as_bytes=False), times=2)


@pytest.mark.parametrize("depth", [1000, 3000])
@pytest.mark.parametrize("shape", ["list", "dict"])
async def test_message_nested_past_the_json_recursion_limit_is_kept(
    boundary: Boundary, depth: int, shape: str
) -> None:
    """json.loads recurses: about 1000 levels, less the caller's stack, made it a FrameError."""
    frame = corpus_frame("segment_text")
    frame["message"][0]["data"]["nested"] = Deep(depth, shape)
    salt_message_id(frame)
    await boundary.check_frame(frame, serialize(frame, ascii_only=False, as_bytes=True), times=2)


async def test_malformed_message_sent_costs_one_short_line(boundary: Boundary) -> None:
    """The whole multi-line pydantic ValidationError was logged: 19 warning lines."""
    frame = {"post_type": "message_sent", "self_id": 10000, "message_type": "group"}
    await boundary.check_frame(frame, serialize(frame, ascii_only=True, as_bytes=False))


async def test_message_with_a_float_self_id_is_kept(boundary: Boundary) -> None:
    """str(10000.0) is "10000.0": the frame was refused as another bot's."""
    frame = corpus_frame("message_group_text")
    frame["self_id"] = 10000.0
    salt_message_id(frame)
    await boundary.check_frame(frame, serialize(frame, ascii_only=True, as_bytes=False))


async def test_message_with_a_stray_notice_type_is_kept(boundary: Boundary) -> None:
    """The upstream collator raises on two *_type fields: the message was a FrameError."""
    frame = corpus_frame("message_group_text")
    frame["notice_type"] = "group_recall"
    salt_message_id(frame)
    await boundary.check_frame(frame, serialize(frame, ascii_only=True, as_bytes=False))
