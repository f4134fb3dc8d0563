"""Which lines a summary reads and how they are shown (pure)."""

from __future__ import annotations

from datetime import UTC, datetime

from pallas.core.actions import Origin
from pallas.product.summaries.window import (
    CHUNK_TOKENS,
    MAX_CHUNKS,
    MAX_HOURS,
    MAX_LINES,
    USAGE,
    Window,
    chunks,
    read_window,
    render,
    speaker_names,
    window_words,
    worth_reading,
)
from pallas.store.conversation import WindowLine

AT = datetime(2026, 12, 6, 4, 30, tzinfo=UTC)  # 12:30 in Shanghai


def line(n: int, user: str, speaker: str, text: str, **extra: object) -> WindowLine:
    fields: dict[str, object] = {"from_bot": False, "is_poke": False, "recalled": False, **extra}
    return WindowLine(message_id=n, platform_message_id=str(n), sender_person_id=n,
                      speaker=speaker, user_id=user, text=text, time=AT, reply_to=None,
                      **fields)  # type: ignore[arg-type]  # fmt: skip


def test_the_words_of_a_request() -> None:
    assert read_window("") == Window()
    assert read_window("3小时") == Window(hours=3, lines=MAX_LINES)
    assert read_window("1.5 小时") == Window(hours=1.5, lines=MAX_LINES)
    assert read_window("30分钟") == Window(hours=0.5, lines=MAX_LINES)
    assert read_window("200条") == Window(hours=MAX_HOURS, lines=200)
    assert read_window("99999条") == Window(hours=MAX_HOURS, lines=MAX_LINES)
    for bad in ("0小时", "1000小时", "0条", "昨天", "3天", "-1小时", "9999分钟"):
        assert read_window(bad) == USAGE, bad


def test_how_a_window_is_named() -> None:
    assert window_words(Window()) == "最近 200 条"
    assert window_words(Window(hours=3, lines=MAX_LINES)) == "最近 3 小时"
    assert window_words(Window(hours=0.5, lines=MAX_LINES)) == "最近 30 分钟"
    assert window_words(Window(after_message=9)) == "你上次说话之后"


def test_only_said_lines_are_read() -> None:
    lines = [
        line(1, "1", "阿青", "周六爬山"),
        line(2, "2", "白杨", "  "),
        line(3, "3", "陈皮", "被撤回的", recalled=True),
        line(4, "4", "丁香", "被禁言的人", suppressed=True),
        line(5, "9", "牛牛", "提醒：喝水", from_bot=True, origin=Origin.TASK.value),
        line(6, "9", "牛牛", "用法：/总结", from_bot=True, origin=Origin.COMMAND.value),
        line(7, "9", "牛牛", "好呀", from_bot=True, origin=Origin.AGENT_REPLY.value),
    ]
    assert [x.message_id for x in worth_reading(lines)] == [1, 7]


def test_speakers_keep_their_names_and_namesakes_are_told_apart() -> None:
    lines = [line(1, "10001", "小明", "a"), line(2, "20002", "小明", "b"),
             line(3, "30003", "", "c"), line(4, "9", "", "d", from_bot=True)]  # fmt: skip
    names = speaker_names(lines, "牛牛")
    assert names == {"10001": "小明（尾号0001）", "20002": "小明（尾号0002）",
                     "30003": "用户0003", "9": "牛牛"}  # fmt: skip
    shown = render([line(1, "10001", "小明", "x" * 300 + "\n换行")], {"10001": "小明"})
    assert shown[0].startswith("12:30 小明：xxx") and shown[0].endswith("…")
    assert "\n" not in render([line(1, "1", "a", "上\n下")], {"1": "a"})[0]


def test_long_windows_are_read_in_chunks_newest_kept() -> None:
    rendered = [f"12:00 某人：{'话' * 100}{n}" for n in range(400)]
    runs = chunks(rendered)
    assert 1 < len(runs) <= MAX_CHUNKS
    assert [x for run in runs for x in run] == rendered[-sum(len(r) for r in runs):]
    assert all(sum(len(x) for x in run) <= CHUNK_TOKENS + len(run) * 10 for run in runs)
    assert chunks(rendered[:3]) == [rendered[:3]]
    assert chunks([]) == []
