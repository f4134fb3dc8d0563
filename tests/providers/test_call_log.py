"""The model call log: naming, rotation, retention, truncation, redaction, failure."""

from __future__ import annotations

import asyncio
import base64
import io
import os
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from loguru import logger

from pallas.providers.call_log import FILE_PATTERN, CallLog, SizeOrDay
from pallas.providers.call_record import CallRecord, render_record, summary_line

START = datetime(2026, 11, 30, 17, 21, 0, tzinfo=UTC)
RECORD = CallRecord(
    started_at=datetime(2026, 11, 30, 17, 22, 3, 456000, tzinfo=UTC),
    model="deepseek/chat",
    upstream_model="deepseek-chat",
    model_type="chat",
    purpose="reply",
    outcome="ok",
    duration_ms=1234.6,
)
MakeLog = Callable[..., CallLog]


@pytest.fixture
def make_log(tmp_path: Path) -> Iterator[MakeLog]:
    """CallLogs under tmp_path/llm, all closed at the end of the test."""
    made: list[CallLog] = []

    def make(started_at: datetime = START, **options: Any) -> CallLog:
        log = CallLog(tmp_path / "llm", started_at=started_at, **options)
        made.append(log)
        return log

    yield make
    for log in made:
        log.close()


@pytest.fixture
def warnings() -> Iterator[list[str]]:
    messages: list[str] = []
    sink = logger.add(lambda m: messages.append(m.record["message"]), level="WARNING")
    yield messages
    logger.remove(sink)


def numbered(number: int, filler: int = 300) -> CallRecord:
    return replace(RECORD, output_text=f"<r{number:02d}>" + "x" * filler)


def numbers_in(path: Path) -> list[int]:
    text = path.read_text(encoding="utf-8")
    return [int(chunk[:2]) for chunk in text.split("<r")[1:]]


# ------------------------------------------------------------------------------ naming


def test_file_is_named_after_the_start_in_utc_and_clashes_get_a_suffix(
    make_log: MakeLog,
) -> None:
    first = make_log().open()
    # The same instant given in UTC+8 names the same start.
    same = START.astimezone(timezone(timedelta(hours=8)))
    second = make_log(started_at=same).open()
    third = make_log().open()

    assert first.name == "llm-20261130-172100.log"
    assert second.name == "llm-20261130-172100-1.log"
    assert third.name == "llm-20261130-172100-2.log"
    assert first.exists() and second.exists() and third.exists()


def test_path_is_none_until_opened_and_open_is_idempotent(make_log: MakeLog) -> None:
    log = make_log()
    assert log.path is None
    path = log.open()
    assert log.path == path
    assert log.open() == path
    assert [p.name for p in path.parent.iterdir()] == [path.name]


# ---------------------------------------------------------------------------- rotation


def pieces_of(current: Path) -> list[Path]:
    """The rotated pieces of a start, oldest first (by the records they hold)."""
    found = current.parent.glob(f"{current.stem}.*.log")
    return sorted(found, key=lambda path: numbers_in(path)[0])


def test_rotation_by_size_keeps_at_most_max_pieces_of_whole_records(make_log: MakeLog) -> None:
    log = make_log(max_bytes=2_000, max_pieces=3)
    current = log.open()

    number = 0
    while len(pieces_of(current)) < 2:
        assert number < 50, "no second rotation"
        number += 1
        log.write(numbered(number))
        log.flush()
    first = pieces_of(current)[0]
    # A rotated piece is never touched again: the next rotation starts a new one.
    assert numbers_in(first)[0] == 1
    seen_first = first.read_text(encoding="utf-8")
    log.write(numbered(number := number + 1))
    log.flush()
    assert first.read_text(encoding="utf-8") == seen_first

    for _ in range(30):
        number += 1
        log.write(numbered(number))
    log.flush()

    pieces = pieces_of(current)
    assert len(pieces) == 3
    assert {p.name for p in current.parent.iterdir()} == {current.name, *(p.name for p in pieces)}
    assert all(FILE_PATTERN.fullmatch(p.name) for p in pieces)
    ordered = [n for path in [*pieces, current] for n in numbers_in(path)]
    # Oldest records were dropped; what remains is the unbroken, newest run.
    assert ordered == list(range(ordered[0], number + 1))
    assert ordered[0] > 1
    for path in [current, *pieces]:
        text = path.read_text(encoding="utf-8")
        assert path.stat().st_size <= 2_000
        assert text.count("\n===== end =====\n") == text.count("===== 2026-")


def test_a_new_utc_day_starts_a_new_piece() -> None:
    first, second = START.date(), START.date() + timedelta(days=1)
    days = iter([first, first, second, second])
    rotation = SizeOrDay(max_bytes=1_000_000, today=lambda: next(days))
    file = io.StringIO()
    assert not rotation("first\n", file)  # an empty file is never rotated
    file.write("first\n")
    assert not rotation("second\n", file)
    assert rotation("third\n", file)  # the first message of the next day
    assert not rotation("fourth\n", file)
    assert not SizeOrDay(max_bytes=10)("longer than ten bytes\n", io.StringIO())
    file = io.StringIO("x" * 8)
    assert SizeOrDay(max_bytes=10)("abc", file)


# --------------------------------------------------------------------------- retention


def test_only_the_newest_starts_are_kept_by_name_not_mtime(
    make_log: MakeLog, tmp_path: Path
) -> None:
    directory = tmp_path / "llm"
    directory.mkdir()
    old_starts = [
        ["llm-20261101-000000.log", "llm-20261101-000000.1.log"],
        ["llm-20261102-000000.log"],
        ["llm-20261103-000000.log"],
        ["llm-20261103-000000-1.log", "llm-20261103-000000-1.1.log", "llm-20261103-000000-1.2.log"],
        ["llm-20261104-000000.log"],
    ]
    unrelated = ["notes.txt", "llm-latest.log", "llm-20261101-000000.log.bak", "main.log"]
    for age, names in enumerate(old_starts):
        for name in names:
            path = directory / name
            path.write_text("old\n", encoding="utf-8")
            # The oldest start gets the newest mtime: only the name may decide.
            os.utime(path, (1_000_000 - age * 1000, 1_000_000 - age * 1000))
    for name in unrelated:
        (directory / name).write_text("keep me\n", encoding="utf-8")

    current = make_log().open()

    kept = {p.name for p in directory.iterdir()}
    assert kept == {current.name, *old_starts[3], *old_starts[4], *unrelated}


def test_own_start_is_kept_even_when_the_clock_went_back(make_log: MakeLog, tmp_path: Path) -> None:
    directory = tmp_path / "llm"
    directory.mkdir()
    later = ["llm-20271201-000000.log", "llm-20271202-000000.log", "llm-20271203-000000.log"]
    for name in later:
        (directory / name).write_text("later\n", encoding="utf-8")

    current = make_log().open()

    assert {p.name for p in directory.iterdir()} == {current.name, *later[1:]}


# -------------------------------------------------------------------------- truncation


def test_a_long_part_is_cut_at_max_part_chars_with_a_marker() -> None:
    record = replace(RECORD, input_messages=[{"role": "user", "content": "a" * 150_000}])
    text = render_record(record)

    marker = "…[cut: 150000 chars in total]"
    line = next(line for line in text.splitlines() if line.startswith("aaa"))
    assert line.endswith(marker)
    assert len(line) == 100_000
    assert line == "a" * (100_000 - len(marker)) + marker


def test_parts_inside_lists_and_output_are_cut_too() -> None:
    record = replace(
        RECORD,
        input_messages=[{"role": "user", "content": [{"type": "text", "text": "p" * 100_001}]}],
        output_text="o" * 120_000,
    )
    lines = render_record(record).splitlines()

    assert max(len(line) for line in lines) == 100_000
    assert any(line.endswith("…[cut: 100001 chars in total]") for line in lines)
    assert any(line.endswith("…[cut: 120000 chars in total]") for line in lines)


def test_a_whole_record_is_cut_at_max_record_chars(make_log: MakeLog) -> None:
    messages = [{"role": "user", "content": "b" * 90_000} for _ in range(8)]
    record = replace(RECORD, input_messages=messages)
    text = render_record(record)

    assert len(text) <= 500_000
    assert len(text) > 499_000
    assert "chars in total]\n===== end =====\n" in text
    assert text.endswith("===== end =====\n")
    assert text.startswith("===== 2026-11-30T17:22:03.456+00:00 =====\n")

    log = make_log()
    path = log.open()
    log.write(record)
    log.flush()
    assert path.read_text(encoding="utf-8") == text


# ---------------------------------------------------------------------------- contents


def test_images_and_audio_are_logged_as_type_and_length_never_base64(
    make_log: MakeLog,
) -> None:
    payload = base64.b64encode(os.urandom(30_000)).decode()
    data_url = f"data:image/png;base64,{payload}"
    long_url = "https://example.com/" + "i" * 500
    record = replace(
        RECORD,
        input_messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "what is this?"},
                    {"type": "image_url", "image_url": {"url": data_url}},
                    {"type": "input_audio", "input_audio": {"data": payload, "format": "wav"}},
                    {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
                    {"type": "image_url", "image_url": {"url": long_url}},
                    {"type": "file", "file": {"file_data": payload}},
                ],
            }
        ],
    )
    log = make_log()
    path = log.open()
    log.write(record)
    log.flush()
    text = path.read_text(encoding="utf-8")

    assert f"[image_url: data URL, {len(data_url)} chars]" in text
    assert f"[input_audio wav: {len(payload)} chars]" in text
    assert "[image_url: https://example.com/cat.png]" in text
    long_line = next(line for line in text.splitlines() if "example.com/iii" in line)
    assert len(long_line) <= len("[image_url: ]") + 300
    assert "[file part:" in text
    assert "base64" not in text
    for start in range(0, len(payload) - 40, 4_000):
        assert payload[start : start + 40] not in text


def test_tool_calls_in_input_and_output(make_log: MakeLog) -> None:
    record = replace(
        RECORD,
        tool_names=["get_weather", "search"],
        input_messages=[
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "weather in Paris?", "name": "alice"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21°C"},
        ],
        output_tool_calls=[("search", '{"q": "Paris events"}')],
    )
    text = render_record(record)

    assert "tools: get_weather, search\n" in text
    assert "[system]\nbe brief\n" in text
    assert "[user name=alice]\nweather in Paris?\n" in text
    assert '[assistant]\n[tool_call call_1] get_weather: {"city": "Paris"}\n' in text
    assert "[tool tool_call_id=call_1]\nsunny, 21°C\n" in text
    assert '--- output ---\n[tool_call] search: {"q": "Paris events"}\n' in text


def test_embeddings_show_the_inputs_and_the_vector_shape() -> None:
    record = replace(
        RECORD,
        model="openai/embed",
        model_type="embedding",
        purpose="embedding",
        input_texts=["hello", "world"],
        output_vectors=(2, 1024),
    )
    text = render_record(record)

    assert "type: embedding\n" in text
    assert "--- input ---\n[text 1]\nhello\n[text 2]\nworld\n" in text
    assert "--- output ---\n[vectors: count=2 dimension=1024]\n" in text


def test_header_shows_unknown_tokens_estimation_and_the_error() -> None:
    record = replace(
        RECORD,
        outcome="timeout",
        prompt_tokens=120,
        usage_estimated=True,
        error="read timed out after 30 s",
        stream_key="group:123",
        attempt=2,
    )
    text = render_record(record)

    assert "model: deepseek/chat (upstream deepseek-chat)\n" in text
    assert "purpose: reply\noutcome: timeout\nattempt: 2\nduration_ms: 1235\n" in text
    assert "tokens: in=120 out=? cache_hit=? (estimated)\n" in text
    assert "cost: ?\n" in text
    assert "stream: group:123\n" in text
    assert "--- error ---\nread timed out after 30 s\n" in text
    assert "--- output ---\n(none)\n" in text


def test_summary_line_carries_figures_but_no_content() -> None:
    secret = "my bank password is hunter2"
    record = replace(
        RECORD,
        input_messages=[{"role": "user", "content": secret}],
        output_text=secret,
        output_tool_calls=[("remember", secret)],
        error=secret,
        prompt_tokens=12,
        cached_tokens=4,
        cost=0.00125,
        stream_key="group:123",
    )
    line = summary_line(record)

    assert "\n" not in line
    assert "hunter2" not in line
    for part in ["deepseek/chat", "purpose=reply", "outcome=ok", "1235ms"]:
        assert part in line
    assert "in=12 out=? cache_hit=4" in line
    assert "cost=0.001250" in line
    assert "cost" not in summary_line(replace(record, cost=None))


# ---------------------------------------------------------------------------- lifetime


def test_writes_before_open_and_after_close_are_dropped(make_log: MakeLog) -> None:
    log = make_log()
    log.write(numbered(1))
    path = log.open()
    log.write(numbered(2))
    log.close()
    log.write(numbered(3))
    log.flush()
    log.close()

    assert numbers_in(path) == [2]


def test_a_disk_error_is_reported_once_and_writing_resumes(
    make_log: MakeLog, tmp_path: Path, warnings: list[str]
) -> None:
    log = make_log()
    path = log.open()
    log.write(numbered(1))
    log.flush()
    # The directory disappears and a plain file takes its place: every write now fails.
    directory = tmp_path / "llm"
    path.unlink()
    directory.rmdir()
    directory.write_text("not a directory", encoding="utf-8")

    log.write(numbered(2))
    log.write(numbered(3))
    log.flush()

    assert len(warnings) == 1
    assert "cannot write" in warnings[0]
    assert "FileExistsError" in warnings[0] or "NotADirectoryError" in warnings[0]

    directory.unlink()
    log.write(numbered(4))
    log.flush()
    assert numbers_in(path) == [4]
    assert len(warnings) == 1


def test_a_file_removed_or_replaced_between_writes_is_not_written_into_the_void(
    make_log: MakeLog,
) -> None:
    log = make_log()
    path = log.open()
    log.write(numbered(1))
    log.flush()
    path.unlink()
    log.write(numbered(2))
    log.flush()
    assert numbers_in(path) == [2]

    moved = path.with_name("moved-away.log")
    path.rename(moved)
    path.write_text("", encoding="utf-8")  # another file takes the name
    log.write(numbered(3))
    log.flush()
    assert numbers_in(moved) == [2]
    assert numbers_in(path) == [3]


def test_a_message_list_changed_after_the_write_does_not_change_the_record(
    make_log: MakeLog,
) -> None:
    messages = [{"role": "user", "content": "first round"}]
    log = make_log()
    path = log.open()
    log.write(replace(RECORD, input_messages=messages))
    messages.append({"role": "assistant", "content": "second round"})
    log.flush()

    text = path.read_text(encoding="utf-8")
    assert "first round" in text and "second round" not in text


async def test_records_written_on_the_event_loop_reach_the_file_without_a_flush(
    make_log: MakeLog,
) -> None:
    log = make_log()
    path = log.open()
    log.write(numbered(1))
    log.write(numbered(2))
    for _ in range(1_000):  # a liveness bound, not a speed check
        if numbers_in(path) == [1, 2]:
            break
        await asyncio.sleep(0.01)
    assert numbers_in(path) == [1, 2]

    log.write(numbered(3))
    log.close()  # before the loop turned again: close still writes it
    assert numbers_in(path) == [1, 2, 3]


def test_an_unexpected_message_shape_is_sized_not_dumped() -> None:
    record = replace(RECORD, input_messages=["iVBORw0KGgo" * 10])  # type: ignore[list-item]
    text = render_record(record)

    assert "[str message: 110 chars]" in text
    assert "iVBORw0KGgo" not in text


# --------------------------------------------------------------------- age-based pruning


def test_files_last_written_before_the_cutoff_go_but_never_the_current_one(
    make_log: MakeLog, tmp_path: Path
) -> None:
    folder = tmp_path / "llm"
    folder.mkdir()
    old = folder / "llm-20261001-000000.log"
    old_piece = folder / "llm-20261001-000000.1.log"
    recent = folder / "llm-20261120-000000.log"
    other = folder / "notes.txt"  # not ours: never touched
    for path in (old, old_piece, recent, other):
        path.write_text("x", encoding="utf-8")
    cutoff = START - timedelta(days=30)
    for path in (old, old_piece, other):
        stamp = (cutoff - timedelta(days=1)).timestamp()
        os.utime(path, (stamp, stamp))
    log = make_log()
    current = log.open()
    own_piece = current.with_name(f"{current.stem}.2026-10-01_00-00-00_000000.log")
    own_piece.write_text("x", encoding="utf-8")
    stamp = (cutoff - timedelta(days=5)).timestamp()
    for path in (current, own_piece):  # a quiet run: its own files are old, and stay
        os.utime(path, (stamp, stamp))
    assert log.prune_older_than(cutoff) == 2
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        [recent.name, other.name, current.name, own_piece.name]
    )


def test_pruning_a_log_never_opened_finds_nothing(make_log: MakeLog) -> None:
    assert make_log().prune_older_than(START) == 0


def test_no_other_sink_sees_a_record_not_even_when_the_disk_fails(
    make_log: MakeLog, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[str] = []
    everything = logger.add(lambda m: seen.append(str(m)), level=0, format="{message} {extra}")
    try:
        log = make_log()
        path = log.open()
        log.write(numbered(1))
        log.flush()
        path.unlink()
        (tmp_path / "llm").rmdir()
        (tmp_path / "llm").write_text("not a directory", encoding="utf-8")
        log.write(numbered(2))
        log.flush()
    finally:
        logger.remove(everything)
    printed = capsys.readouterr()
    assert len(seen) == 1 and "cannot write" in seen[0]  # the one report, and nothing else
    assert not any("<r0" in text for text in [*seen, printed.out, printed.err])


def test_a_lone_surrogate_is_written_escaped_and_never_reported(
    make_log: MakeLog, warnings: list[str]
) -> None:
    log = make_log(max_bytes=2_000)
    path = log.open()
    log.write(replace(RECORD, output_text="半个表情\ud83d在这里"))
    log.write(numbered(2))
    log.flush()
    text = path.read_text(encoding="utf-8")
    assert "半个表情\\ud83d在这里" in text and numbers_in(path) == [2]
    assert warnings == []
