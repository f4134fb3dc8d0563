"""Welcome / farewell: settings file, decision, rendering."""

from __future__ import annotations

from pathlib import Path

import pytest

from pallas.core.inbound import MemberChange, Segment, SegmentKind
from pallas.product.deterministic.notices import (
    DEFAULT_FAREWELL,
    DEFAULT_WELCOME,
    OFF,
    GroupNotices,
    decide_notice,
    load_notices,
    parse_notices,
    render_notice,
)
from tests.support.inbound import BOT_ID, T0, group


def change(user_id: str = "42", *, joined: bool = True, sub_type: str = "") -> MemberChange:
    sub = sub_type or ("approve" if joined else "leave")
    return MemberChange(group(), user_id, "0", joined, T0, sub)


BOTH = GroupNotices(welcome="欢迎 {name}！", farewell="再见 {name}")
DEFAULTS = GroupNotices(welcome=True, farewell=True)

CASES: list[tuple[str, MemberChange, GroupNotices, str | None]] = [
    ("off by default: join", change(), OFF, None),
    ("off by default: leave", change(joined=False), OFF, None),
    ("welcome template", change(), BOTH, "欢迎 {name}！"),
    ("farewell template", change(joined=False), BOTH, "再见 {name}"),
    ("invited members are welcomed too", change(sub_type="invite"), BOTH, "欢迎 {name}！"),
    ("true means the default welcome", change(), DEFAULTS, DEFAULT_WELCOME),
    ("true means the default farewell", change(joined=False), DEFAULTS, DEFAULT_FAREWELL),
    ("only welcome enabled", change(joined=False), GroupNotices(welcome=True), None),
    ("the bot joining is not welcomed", change(BOT_ID), DEFAULTS, None),
    (
        "the bot removed gets no farewell",
        change(BOT_ID, joined=False, sub_type="kick_me"),
        DEFAULTS,
        None,
    ),
    ("a kick gets no farewell", change(joined=False, sub_type="kick"), DEFAULTS, None),
]


@pytest.mark.parametrize(
    ("case", "member", "settings", "expected"), CASES, ids=[c[0] for c in CASES]
)
def test_decide_notice(
    case: str, member: MemberChange, settings: GroupNotices, expected: str | None
) -> None:
    assert decide_notice(member, settings) == expected, case


def test_render_splits_out_the_mention_and_fills_names() -> None:
    assert render_notice("欢迎 {at}（{name}, {user_id}）", user_id="42", name="小明") == (
        Segment(SegmentKind.TEXT, text="欢迎 "),
        Segment(SegmentKind.AT, text="@小明", target="42"),
        Segment(SegmentKind.TEXT, text="（小明, 42）"),
    )


def test_a_name_cannot_inject_a_mention_or_placeholders() -> None:
    segments = render_notice("hi {name}", user_id="42", name="{at}{user_id}[CQ:at,qq=all]")
    assert segments == (Segment(SegmentKind.TEXT, text="hi {at}{user_id}[CQ:at,qq=all]"),)


def test_parse_reads_groups_and_blank_templates_are_off() -> None:
    groups = parse_notices(
        '{"1": {"welcome": "hi {at}"}, "2": {"farewell": true, "welcome": "  "}}'
    )
    assert groups["1"] == GroupNotices(welcome="hi {at}")
    assert groups["2"].template(joined=True) is None
    assert groups["2"].template(joined=False) == DEFAULT_FAREWELL


@pytest.mark.parametrize(
    "text",
    ["not json", '["a list"]', '{"1": {"welcom": true}}', '{"1": {"welcome": 3.5}}', '{"1": 1}'],
)
def test_a_bad_file_means_off(tmp_path: Path, text: str) -> None:
    path = tmp_path / "notices.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError):
        parse_notices(text)
    assert load_notices(path) == {}


def test_a_missing_file_means_off(tmp_path: Path) -> None:
    assert load_notices(tmp_path / "notices.json") == {}


def test_an_edited_file_applies_on_the_next_read(tmp_path: Path) -> None:
    path = tmp_path / "notices.json"
    path.write_text('{"500": {"welcome": true}}', encoding="utf-8")
    assert load_notices(path)["500"].template(joined=True) == DEFAULT_WELCOME
    path.write_text('{"500": {"welcome": false}}', encoding="utf-8")
    assert load_notices(path)["500"].template(joined=True) is None
