"""Skills: files parsed or skipped with a warning, owner overrides, stored switches, the tools."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from loguru import logger
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.inbound import StreamKey, StreamKind
from pallas.product.llm.tools.base import (
    Conversation,
    Tool,
    ToolContext,
    ToolError,
    ToolTag,
    Visibility,
)
from pallas.product.llm.tools.skills import (
    BUILTIN_SKILLS_DIR,
    CUT_MARKER,
    GET_MAX_CHARS,
    GetSkillContentTool,
    ListSkillsTool,
    Skill,
    SkillBook,
    SkillSource,
    load_skills,
    owner_skills_dir,
    skill_tools,
)
from pallas.store.capabilities import load_settings

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def warnings() -> Iterator[list[str]]:
    """The loguru warnings logged during the test."""
    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(m.record["message"]), level="WARNING")
    yield lines
    logger.remove(sink)


def write(folder: Path, filename: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / filename
    path.write_text(text, encoding="utf-8")
    return path


def skill_file(description: str = "一句话简介", body: str = "正文", name: str | None = None) -> str:
    head = f"name: {name}\n" if name is not None else ""
    return f"---\n{head}description: {description}\n---\n{body}\n"


def make_skill(name: str, body: str = "正文", description: str = "简介") -> Skill:
    return Skill(name, description, body, SkillSource.BUILTIN, Path(f"{name}.md"))


def context(engine: AsyncEngine) -> ToolContext:
    stream = StreamKey("qq", "10001", StreamKind.GROUP, "20002")
    return ToolContext(Conversation(1, stream), turn_id=1, watermark=0, engine=engine, now=NOW)


# --- files -------------------------------------------------------------------------------


def test_a_valid_file_is_read(tmp_path: Path, warnings: list[str]) -> None:
    body = "# 标题\n\n第一段。\n\n---\n\n分隔线之后的内容也是正文。"
    write(tmp_path / "b", "weather.md", skill_file("查天气的办法", body, name="weather-help"))

    skills = load_skills(tmp_path / "b", tmp_path / "o")

    skill = skills["weather-help"]
    assert skill.description == "查天气的办法"
    assert skill.body == body
    assert skill.source is SkillSource.BUILTIN
    assert skill.path == tmp_path / "b" / "weather.md"
    assert warnings == []


def test_the_name_defaults_to_the_file_stem(tmp_path: Path) -> None:
    write(tmp_path, "my_skill.md", skill_file())
    assert list(load_skills(tmp_path, tmp_path / "none")) == ["my_skill"]


def test_windows_line_endings_and_a_bom_are_accepted(tmp_path: Path, warnings: list[str]) -> None:
    tmp_path.joinpath("crlf.md").write_bytes(
        "\ufeff---\r\ndescription: 简介\r\n---\r\n正文\r\n".encode()
    )
    skills = load_skills(tmp_path, tmp_path / "none")
    assert skills["crlf"].body == "正文"
    assert warnings == []


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("---\nname: ok\n---\n正文\n", "no description"),
        ("---\ndescription: '   '\n---\n正文\n", "no description"),
        ("---\ndescription: 2025-01-01\n---\n正文\n", "no description"),
        ("---\ndescription: |\n  第一行\n  第二行\n---\n正文\n", "one line"),
        ("---\nname: Bad Name\ndescription: 简介\n---\n正文\n", "invalid name"),
        ("---\nname: -dash\ndescription: 简介\n---\n正文\n", "invalid name"),
        (f"---\nname: {'a' * 65}\ndescription: 简介\n---\n正文\n", "invalid name"),
        ("---\nname: 12\ndescription: 简介\n---\n正文\n", "invalid name"),
        ("# 只有正文\n没有 front matter\n", "no front matter"),
        ("---\ndescription: 简介\n正文，没有结束的分隔线\n", "not closed"),
        ("---\ndescription: [unclosed\n---\n正文\n", "not valid YAML"),
        ("---\n- a list\n---\n正文\n", "not a mapping"),
        ("---\ndescription: 简介\n---\n\n   \n", "body is empty"),
        ("", "empty"),
        ("  \n\n", "empty"),
    ],
)
def test_an_invalid_file_is_skipped_with_one_warning(
    tmp_path: Path, warnings: list[str], content: str, problem: str
) -> None:
    write(tmp_path, "bad.md", content)
    write(tmp_path, "good.md", skill_file())

    skills = load_skills(tmp_path, tmp_path / "none")

    assert list(skills) == ["good"]
    assert len(warnings) == 1
    assert "bad.md" in warnings[0]
    assert problem in warnings[0]


def test_a_non_utf8_file_is_skipped_with_a_warning(tmp_path: Path, warnings: list[str]) -> None:
    tmp_path.joinpath("gbk.md").write_bytes(skill_file().encode("gbk"))

    assert load_skills(tmp_path, tmp_path / "none") == {}
    assert len(warnings) == 1
    assert "gbk.md" in warnings[0]
    assert "UTF-8" in warnings[0]


def test_two_files_with_one_name_keep_the_first(tmp_path: Path, warnings: list[str]) -> None:
    write(tmp_path, "a.md", skill_file("甲", name="same"))
    write(tmp_path, "b.md", skill_file("乙", name="same"))

    skills = load_skills(tmp_path, tmp_path / "none")

    assert skills["same"].description == "甲"
    assert len(warnings) == 1
    assert "b.md" in warnings[0]
    assert "a.md" in warnings[0]


def test_missing_folders_are_no_skills(tmp_path: Path, warnings: list[str]) -> None:
    assert load_skills(tmp_path / "x", tmp_path / "y") == {}
    assert warnings == []


def test_the_owner_overrides_a_builtin_and_the_result_is_sorted(tmp_path: Path) -> None:
    builtin, owner = tmp_path / "builtin", owner_skills_dir(tmp_path / "data")
    write(builtin, "zeta.md", skill_file("内置 zeta"))
    write(builtin, "shared.md", skill_file("内置版本", "内置正文"))
    write(owner, "shared.md", skill_file("主人的版本", "主人的正文"))
    write(owner, "alpha.md", skill_file("主人的 alpha"))

    skills = load_skills(builtin, owner)

    assert list(skills) == ["alpha", "shared", "zeta"]
    assert skills["shared"].description == "主人的版本"
    assert skills["shared"].body == "主人的正文"
    assert skills["shared"].source is SkillSource.OWNER
    assert skills["zeta"].source is SkillSource.BUILTIN
    assert owner == tmp_path / "data" / "skills"


def test_the_shipped_skills_load_without_warnings(warnings: list[str], tmp_path: Path) -> None:
    skills = load_skills(BUILTIN_SKILLS_DIR, tmp_path / "none")

    assert {"group-etiquette", "chat-history-lookup"} <= set(skills)
    assert warnings == []
    for skill in skills.values():
        assert skill.source is SkillSource.BUILTIN
        assert len(skill.body) <= GET_MAX_CHARS  # fetched whole, never cut


# --- switches ----------------------------------------------------------------------------


async def test_switches_default_on_and_not_embedded(engine: AsyncEngine) -> None:
    book = SkillBook(engine, {"b": make_skill("b"), "a": make_skill("a")})

    states = await book.state()

    assert [(s.skill.name, s.enabled, s.embedded) for s in states] == [
        ("a", True, False),
        ("b", True, False),
    ]


async def test_switches_are_stored_and_read_back(engine: AsyncEngine) -> None:
    skills = {"a": make_skill("a"), "b": make_skill("b")}
    book = SkillBook(engine, skills)

    await book.set_enabled("a", False, NOW)
    await book.set_embedded("a", True, NOW)  # keeps the stored "off"
    await book.set_embedded("b", True, NOW)
    await book.set_embedded("b", False, NOW)

    fresh = SkillBook(engine, skills)  # as after a restart
    states = {s.skill.name: (s.enabled, s.embedded) for s in await fresh.state()}
    assert states == {"a": (False, True), "b": (True, False)}
    stored = await load_settings(engine, "skill")
    assert (stored["a"].enabled, stored["a"].embedded) == (False, True)
    assert stored["b"].enabled is None  # never switched: still the default

    await fresh.set_enabled("a", True, NOW)
    first = (await fresh.state())[0]
    assert (first.skill.name, first.enabled, first.embedded) == ("a", True, True)


async def test_an_unknown_name_cannot_be_switched(engine: AsyncEngine) -> None:
    book = SkillBook(engine, {"a": make_skill("a")})
    with pytest.raises(KeyError):
        await book.set_enabled("nope", False, NOW)
    with pytest.raises(KeyError):
        await book.set_embedded("nope", True, NOW)
    assert await load_settings(engine, "skill") == {}


async def test_a_stored_switch_for_a_removed_skill_is_ignored(engine: AsyncEngine) -> None:
    await SkillBook(engine, {"gone": make_skill("gone")}).set_embedded("gone", True, NOW)

    book = SkillBook(engine, {"a": make_skill("a")})

    assert [s.skill.name for s in await book.state()] == ["a"]
    assert await book.embedded_text() == ""


async def test_listed_and_embedded_split_the_enabled_skills(engine: AsyncEngine) -> None:
    names = ["embedded", "listed", "off", "off-embedded"]
    book = SkillBook(engine, {n: make_skill(n, body=f"{n} 的正文") for n in names})
    await book.set_embedded("embedded", True, NOW)
    await book.set_enabled("off", False, NOW)
    await book.set_enabled("off-embedded", False, NOW)
    await book.set_embedded("off-embedded", True, NOW)

    assert [s.name for s in await book.listed()] == ["listed"]
    assert await book.embedded_text() == "【技能：embedded】\nembedded 的正文"


async def test_embedded_text_joins_bodies_in_name_order(engine: AsyncEngine) -> None:
    book = SkillBook(engine, {"b": make_skill("b", "乙"), "a": make_skill("a", "甲")})
    assert await book.embedded_text() == ""  # none embedded yet

    await book.set_embedded("b", True, NOW)
    await book.set_embedded("a", True, NOW)

    assert await book.embedded_text() == "【技能：a】\n甲\n\n【技能：b】\n乙"


async def test_embedded_text_is_capped_with_a_marker(engine: AsyncEngine) -> None:
    book = SkillBook(engine, {"long": make_skill("long", "长" * 5000)})
    await book.set_embedded("long", True, NOW)

    text = await book.embedded_text(max_chars=300)

    assert len(text) <= 300
    assert text.startswith("【技能：long】\n长")
    assert text.endswith(CUT_MARKER)
    assert len(await book.embedded_text()) <= 4000


# --- tools -------------------------------------------------------------------------------


def test_the_tool_specs() -> None:
    book = SkillBook(None, {})  # type: ignore[arg-type]  # specs need no database
    listing, getter = skill_tools(book)
    assert isinstance(listing, ListSkillsTool) and isinstance(getter, GetSkillContentTool)
    assert listing.spec.name == "skills.list"
    assert getter.spec.name == "skills.get"
    for tool in (listing, getter):
        assert isinstance(tool, Tool)
        assert ToolTag.READ_ONLY in tool.spec.tags and tool.spec.read_only
        assert tool.spec.domains == ("general",)
        assert tool.spec.visibility is Visibility.VISIBLE
        assert tool.can_enable().available  # an empty list is an honest answer
    assert listing.spec.parameters["properties"] == {}
    assert getter.spec.parameters["required"] == ["name"]
    assert getter.spec.parameters["properties"]["name"]["type"] == "string"


async def test_list_tool_shows_enabled_not_embedded_skills(engine: AsyncEngine) -> None:
    skills = {
        "a": make_skill("a", description="甲的简介"),
        "b": make_skill("b", description="乙的简介"),
        "c": make_skill("c"),
    }
    book = SkillBook(engine, skills)
    await book.set_enabled("b", False, NOW)
    await book.set_embedded("c", True, NOW)

    output = await ListSkillsTool(book).run({}, context(engine))

    assert output.data == [{"name": "a", "description": "甲的简介"}]


async def test_list_tool_with_no_skills_is_an_empty_list(engine: AsyncEngine) -> None:
    output = await ListSkillsTool(SkillBook(engine, {})).run({}, context(engine))
    assert output.data == []


async def test_get_tool_returns_the_body(engine: AsyncEngine) -> None:
    book = SkillBook(engine, {"howto": make_skill("howto", "怎么做：第一步……")})
    tool = GetSkillContentTool(book)

    assert (await tool.run({"name": "howto"}, context(engine))).data == "怎么做：第一步……"
    assert (await tool.run({"name": " HowTo "}, context(engine))).data == "怎么做：第一步……"


async def test_get_tool_caps_a_long_body(engine: AsyncEngine) -> None:
    book = SkillBook(engine, {"long": make_skill("long", "字" * 20_000)})

    data = (await GetSkillContentTool(book).run({"name": "long"}, context(engine))).data

    assert len(data) == GET_MAX_CHARS
    assert data.endswith(CUT_MARKER)


async def test_get_tool_refuses_unknown_and_disabled_skills(engine: AsyncEngine) -> None:
    book = SkillBook(engine, {"off": make_skill("off")})
    await book.set_enabled("off", False, NOW)
    tool = GetSkillContentTool(book)

    with pytest.raises(ToolError, match="没有叫 x 的技能"):
        await tool.run({"name": "x"}, context(engine))
    with pytest.raises(ToolError, match="技能 off 已关闭"):
        await tool.run({"name": "off"}, context(engine))
    with pytest.raises(ToolError, match="name"):
        await tool.run({}, context(engine))


async def test_get_tool_serves_an_embedded_skill_too(engine: AsyncEngine) -> None:
    book = SkillBook(engine, {"e": make_skill("e", "嵌入的正文")})
    await book.set_embedded("e", True, NOW)

    assert (
        await GetSkillContentTool(book).run({"name": "e"}, context(engine))
    ).data == "嵌入的正文"
