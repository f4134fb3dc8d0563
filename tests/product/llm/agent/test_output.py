"""Reply shaping: intents out, echoed markup out, a capped text split into chat bubbles."""

from __future__ import annotations

import pytest

from pallas.product.llm.agent.output import (
    MAX_INTENT_CHARS,
    MAX_INTENTS,
    Intent,
    IntentKind,
    RemovedKind,
    ShapedReply,
    shape_reply,
    split_into_bubbles,
    take_intents,
)

BOT = ("牛牛", "Pallas")
STICKER = IntentKind.STICKER
MOOD = IntentKind.MOOD
PROMISE = IntentKind.PROMISE
OFFENCE = IntentKind.OFFENCE

# A 61-character line: three sentences, the first two fit one bubble.
LONG_LINE = (
    "我刚看了一下那个帖子，感觉楼主说的也不是完全没道理。"
    "但是他那个数据来源确实有问题，好几个数字都对不上！"
    "你们有人去核实过吗？"
)

# A 72-character line whose only sentence ends sit inside quotes or a code span.
NOTICE = (
    "群公告写的是“周五之前交作业！过期不候。”，"
    "提交命令是 `git push -f origin main!` 千万别搞错了，搞错了就得重新来一遍"
)

# (case, raw reply, bubbles, intents)
INTENT_CASES: list[tuple[str, str, tuple[str, ...], tuple[Intent, ...]]] = [
    ("sticker alone", "[表情:开心]", (), (Intent(STICKER, "开心"),)),
    ("full-width colon", "哈哈哈笑死[表情：笑哭]", ("哈哈哈笑死",), (Intent(STICKER, "笑哭"),)),
    ("english sticker", "[sticker:happy] 好耶", ("好耶",), (Intent(STICKER, "happy"),)),
    ("emoji tag", "<emoji>无语</emoji>", (), (Intent(STICKER, "无语"),)),
    ("sticker tag", "<sticker>狗头</sticker>你说呢", ("你说呢",), (Intent(STICKER, "狗头"),)),
    ("mood bracket", "[mood:开心]今天发工资了！", ("今天发工资了！",), (Intent(MOOD, "开心"),)),
    ("mood chinese", "[心情:低落]唉，又要加班", ("唉，又要加班",), (Intent(MOOD, "低落"),)),
    ("mood tag", "<mood>有点累</mood>\n先睡了。", ("先睡了",), (Intent(MOOD, "有点累"),)),
    ("tag name case", "<EMOJI>无语</Emoji>", (), (Intent(STICKER, "无语"),)),
    ("key case", "[Sticker: happy ] ok", ("ok",), (Intent(STICKER, "happy"),)),
    ("full-width brackets", "【表情：摸鱼】上班中", ("上班中",), (Intent(STICKER, "摸鱼"),)),
    ("one space kept", "好的 [表情:开心] 明天见", ("好的 明天见",), (Intent(STICKER, "开心"),)),
    ("no space added", "好的[表情:开心]明天见", ("好的明天见",), (Intent(STICKER, "开心"),)),
    (
        "order of appearance",
        "<mood>兴奋</mood>冲冲冲！[表情:加油]",
        ("冲冲冲！",),
        (Intent(MOOD, "兴奋"), Intent(STICKER, "加油")),
    ),
    (
        "unclosed tag takes the rest of its line",
        "<emoji>开心 今天真不错\n走了走了",
        ("走了走了",),
        (Intent(STICKER, "开心 今天真不错"),),
    ),
    ("unclosed bracket", "行吧[表情:无奈", ("行吧",), (Intent(STICKER, "无奈"),)),
    (
        "nested tags",
        "<emoji><sticker>狗头</sticker></emoji>",
        (),
        (Intent(STICKER, "狗头"),),
    ),
    ("nested brackets", "[表情:[表情:开心]]", (), (Intent(STICKER, "开心"),)),
    ("bracket in tag", "<emoji>[表情:开心]</emoji>懂了", ("懂了",), (Intent(STICKER, "开心"),)),
    (
        "timed promise",
        "好的主人，明早叫你[承诺:明天08:00 提醒开会]",
        ("好的主人，明早叫你",),
        (Intent(PROMISE, "明天08:00 提醒开会"),),
    ),
    (
        "promise with a full-width colon and brackets",
        "【承诺：20分钟后提醒喝水】记住啦",
        ("记住啦",),
        (Intent(PROMISE, "20分钟后提醒喝水"),),
    ),
    (
        "promise in english",
        "ok [promise: buy milk] done",
        ("ok done",),
        (Intent(PROMISE, "buy milk"),),
    ),
    ("promise tag", "<promise>买牛奶</promise>记下了", ("记下了",), (Intent(PROMISE, "买牛奶"),)),
    ("offence", "你说话注意点[冒犯:骂人]", ("你说话注意点",), (Intent(OFFENCE, "骂人"),)),
    ("offence tag", "<offence>嘲讽</offence>哦", ("哦",), (Intent(OFFENCE, "嘲讽"),)),
    ("offence in english", "[Offence: rude] whatever", ("whatever",), (Intent(OFFENCE, "rude"),)),
    (
        "promise, offence and mood together",
        "[心情:烦]行吧[冒犯:阴阳怪气]\n答应你[承诺:下次注意]",
        ("行吧", "答应你"),
        (Intent(MOOD, "烦"), Intent(OFFENCE, "阴阳怪气"), Intent(PROMISE, "下次注意")),
    ),
    ("unclosed promise", "好[承诺:明天提醒你", ("好",), (Intent(PROMISE, "明天提醒你"),)),
    ("empty promise", "[承诺:]好", ("好",), ()),
    ("a bare promise word stays", "[承诺] 这不是标记", ("[承诺] 这不是标记",), ()),
    ("empty marker", "[表情:]收到", ("收到",), ()),
    ("ordinary brackets stay", "[doge] 你懂的（笑）", ("[doge] 你懂的（笑）",), ()),
    ("a word in brackets stays", "[表情] 这个不是标记", ("[表情] 这个不是标记",), ()),
]


@pytest.mark.parametrize(
    ("raw", "bubbles", "intents"),
    [case[1:] for case in INTENT_CASES],
    ids=[case[0] for case in INTENT_CASES],
)
def test_intent_markers_become_intents(
    raw: str, bubbles: tuple[str, ...], intents: tuple[Intent, ...]
) -> None:
    shaped = shape_reply(raw, bot_names=BOT)
    assert shaped.bubbles == bubbles
    assert shaped.intents == intents


@pytest.mark.parametrize(
    ("reason", "left", "intents"),
    [
        ("他在骂我[冒犯:辱骂]", "他在骂我", (Intent(OFFENCE, "辱骂"),)),
        ("[冒犯：阴阳怪气] 不理", "不理", (Intent(OFFENCE, "阴阳怪气"),)),
        ("<offence>嘲讽</offence>", "", (Intent(OFFENCE, "嘲讽"),)),
        ("没什么好说的[心情:无语]", "没什么好说的", (Intent(MOOD, "无语"),)),
        ("等主人来[承诺:晚上9点 提醒吃药]", "等主人来", (Intent(PROMISE, "晚上9点 提醒吃药"),)),
        ("不关我事", "不关我事", ()),
        ("", "", ()),
    ],
    ids=["offence", "offence first", "offence tag", "mood", "promise", "plain", "empty"],
)
def test_a_silent_reason_gives_up_its_markers(
    reason: str, left: str, intents: tuple[Intent, ...]
) -> None:
    assert take_intents(reason) == (left, intents)


def test_take_intents_is_capped_like_a_reply() -> None:
    left, intents = take_intents("[冒犯:骂人]" * 20 + "[承诺:" + "好" * 100 + "]")
    assert left == ""
    assert len(intents) == MAX_INTENTS
    assert all(i.kind is OFFENCE for i in intents)
    _, [promise] = take_intents("[承诺:" + "好" * 100 + "]")
    assert promise == Intent(PROMISE, "好" * MAX_INTENT_CHARS)


def test_intent_value_is_capped() -> None:
    shaped = shape_reply("<mood>" + "好" * 100)
    assert shaped.intents == (Intent(MOOD, "好" * MAX_INTENT_CHARS),)
    assert shaped.empty


def test_intents_are_capped_in_number() -> None:
    shaped = shape_reply("[表情:开心]" * 50 + "好")
    assert len(shaped.intents) == MAX_INTENTS
    assert shaped.bubbles == ("好",)


# (case, raw reply, bubbles, removed kinds)
MARKUP_CASES: list[tuple[str, str, tuple[str, ...], tuple[str, ...]]] = [
    ("bracketed id", "[#1042] 哈哈哈", ("哈哈哈",), ("message_id_prefix",)),
    ("id with colon", "#1042: 对啊", ("对啊",), ("message_id_prefix",)),
    ("id with full-width colon", "#1042：对啊", ("对啊",), ("message_id_prefix",)),
    ("id on a later line", "第一句\n[#12] 第二句", ("第一句", "第二句"), ("message_id_prefix",)),
    ("speaker with full-width colon", "牛牛：我来了", ("我来了",), ("speaker_prefix",)),
    ("speaker with colon", "牛牛:我来了", ("我来了",), ("speaker_prefix",)),
    ("speaker as the transcript shows it", "牛牛（你）：在呢", ("在呢",), ("speaker_prefix",)),
    ("speaker name case", "pallas: hi", ("hi",), ("speaker_prefix",)),
    (
        "id then speaker",
        "[#1042] 牛牛: 你好",
        ("你好",),
        ("message_id_prefix", "speaker_prefix"),
    ),
    ("hash inside a sentence stays", "我觉得 #1 最好", ("我觉得 #1 最好",), ()),
    ("name inside a sentence stays", "我是牛牛：不服来战", ("我是牛牛：不服来战",), ()),
    ("another speaker stays", "小明：这是他说的", ("小明：这是他说的",), ()),
    (
        "tool_call block",
        '<tool_call>{"name": "search", "arguments": {"q": "天气"}}</tool_call>我查一下',
        ("我查一下",),
        ("tool_markup",),
    ),
    (
        "unclosed tool_call runs to the end",
        '我查查\n<tool_call>{"name": "search", "argu',
        ("我查查",),
        ("tool_markup",),
    ),
    (
        "deepseek tool calls",
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>search\n"
        '```json\n{"q": "天气"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>明天下雨',
        ("明天下雨",),
        ("tool_markup",),
    ),
    (
        "ascii bars",
        "<|tool_calls_begin|>x<|tool_calls_end|>好",
        ("好",),
        ("tool_markup",),
    ),
    (
        "function_calls",
        '<function_calls><invoke name="search"><parameter name="q">天气</parameter>'
        "</invoke></function_calls>明天下雨，记得带伞",
        ("明天下雨，记得带伞",),
        ("tool_markup",),
    ),
    (
        "dsml block",
        '<｜DSML｜function_calls>\n<｜DSML｜invoke name="search">\n'
        '<｜DSML｜parameter name="q" string="true">天气</｜DSML｜parameter>\n'
        "</｜DSML｜invoke>\n</｜DSML｜function_calls>\n明天会下雨",
        ("明天会下雨",),
        ("tool_markup",),
    ),
    ("stray dsml tag", "好的</｜DSML｜invoke>", ("好的",), ("tool_markup",)),
    ("special token", "收到<|im_end|>", ("收到",), ("special_token",)),
    ("stray intent tag", "好的</emoji>", ("好的",), ("intent_residue",)),
    ("dangling intent opener", "好的[表情:", ("好的",), ("intent_residue",)),
    ("say wrapper", "<say>好啊好啊</say>", ("好啊好啊",), ("wrapper_tag",)),
    (
        "reply wrapper around an echoed id",
        "<reply>\n[#88] 行\n</reply>",
        ("行",),
        ("wrapper_tag", "message_id_prefix"),
    ),
    ("think block", "<think>用户在问天气。</think>明天晴", ("明天晴",), ("think_block",)),
    (
        "opener stripped by provider",
        "推理中……</think>\n\n答案是 42",
        ("答案是 42",),
        ("think_block",),
    ),
    ("unclosed think", "<think>我想想要不要回", (), ("think_block",)),
    ("parentheses stay", "（笑）你说得对", ("（笑）你说得对",), ()),
    ("angle brackets stay", "1 < 2 > 0 懂？", ("1 < 2 > 0 懂？",), ()),
]


@pytest.mark.parametrize(
    ("raw", "bubbles", "removed"),
    [case[1:] for case in MARKUP_CASES],
    ids=[case[0] for case in MARKUP_CASES],
)
def test_echoed_markup_is_removed(
    raw: str, bubbles: tuple[str, ...], removed: tuple[str, ...]
) -> None:
    shaped = shape_reply(raw, bot_names=BOT)
    assert shaped.bubbles == bubbles
    assert shaped.removed == removed


def test_speaker_prefix_needs_bot_names() -> None:
    assert shape_reply("牛牛：我来了").bubbles == ("牛牛：我来了",)


# (case, raw reply, bubbles)
WHITESPACE_CASES: list[tuple[str, str, tuple[str, ...]]] = [
    ("empty", "", ()),
    ("blank", " \n\t\u3000\n", ()),
    ("invisible only", "\u200b\ufeff\u200d", ()),
    ("only markup", "<think>x</think><tool_call>{}</tool_call>[表情:开心]", ()),
    ("trimmed", "  \n\n好的  \n", ("好的",)),
    ("blank lines between", "好的\n\n\n\n\n明天见", ("好的", "明天见")),
    ("crlf", "好的\r\n明天见\r晚安", ("好的", "明天见", "晚安")),
    ("a lone period line", "好\n。\n走了", ("好", "走了")),
    (
        "blank lines collapse inside code",
        "```\na = 1\n\n\n\n\nb = 2\n```",
        ("```\na = 1\n\nb = 2\n```",),
    ),
]


@pytest.mark.parametrize(
    ("raw", "bubbles"),
    [case[1:] for case in WHITESPACE_CASES],
    ids=[case[0] for case in WHITESPACE_CASES],
)
def test_whitespace(raw: str, bubbles: tuple[str, ...]) -> None:
    shaped = shape_reply(raw)
    assert shaped.bubbles == bubbles
    assert shaped.empty == (bubbles == ())


# (case, text, max_bubbles, bubbles)
BUBBLE_CASES: list[tuple[str, str, int, tuple[str, ...]]] = [
    ("short lines stay separate", "好\n等我一下", 4, ("好", "等我一下")),
    ("final period dropped", "好的。", 4, ("好的",)),
    ("one period only", "行吧。\n就这样。", 4, ("行吧", "就这样")),
    ("question mark kept", "真的吗？", 4, ("真的吗？",)),
    ("exclamation kept", "冲！", 4, ("冲！",)),
    ("ellipsis kept", "唉……", 4, ("唉……",)),
    ("repeated periods kept", "嗯。。。", 4, ("嗯。。。",)),
    ("short line never split", "好的。我知道了。", 4, ("好的。我知道了",)),
    (
        "long line split at sentence ends",
        LONG_LINE,
        4,
        (
            "我刚看了一下那个帖子，感觉楼主说的也不是完全没道理。"
            "但是他那个数据来源确实有问题，好几个数字都对不上！",
            "你们有人去核实过吗？",
        ),
    ),
    (
        "ellipsis ends a sentence",
        "这个问题我之前也遇到过，查了好久好久都没找到到底是什么原因……"
        "后来才发现是配置文件里少了一个逗号，真的是离谱到家了，浪费我一下午",
        4,
        (
            "这个问题我之前也遇到过，查了好久好久都没找到到底是什么原因……",
            "后来才发现是配置文件里少了一个逗号，真的是离谱到家了，浪费我一下午",
        ),
    ),
    (
        "tiny fragment from a split joins the previous bubble",
        "这个问题我之前也遇到过，查了好久都没找到原因，后来才发现是配置文件里少了一个逗号，"
        "真的是离谱到家了，浪费了我一整个下午！嗯。",
        4,
        (
            "这个问题我之前也遇到过，查了好久都没找到原因，后来才发现是配置文件里少了一个逗号，"
            "真的是离谱到家了，浪费了我一整个下午！嗯",
        ),
    ),
    (
        "never inside a URL",
        "官方文档在这里 https://example.com/docs?page=2&lang=zh!top 里面写得很清楚，"
        "你先看看第三节再说吧",
        4,
        (
            "官方文档在这里 https://example.com/docs?page=2&lang=zh!top 里面写得很清楚，"
            "你先看看第三节再说吧",
        ),
    ),
    (
        "never inside quotes",
        "他原话是「这事我不管了。你们爱怎么弄怎么弄！」然后就下线了，"
        "我们几个面面相觑，也不知道该说啥，最后还是班长出来打了圆场，这才散了",
        4,
        (
            "他原话是「这事我不管了。你们爱怎么弄怎么弄！」然后就下线了，"
            "我们几个面面相觑，也不知道该说啥，最后还是班长出来打了圆场，这才散了",
        ),
    ),
    (
        "never inside curly quotes or a code span",
        NOTICE,
        4,
        (NOTICE,),
    ),
    (
        "fenced code is one bubble",
        "试试这个：\n```python\nprint('你好。')\nprint('世界！')\n```\n应该能跑",
        4,
        ("试试这个：", "```python\nprint('你好。')\nprint('世界！')\n```", "应该能跑"),
    ),
    (
        "unclosed fence runs to the end",
        "看：\n```\nrm -rf /tmp/x",
        4,
        ("看：", "```\nrm -rf /tmp/x"),
    ),
    ("tail merged with a space", "一\n二\n三\n四\n五\n六", 4, ("一", "二", "三", "四 五 六")),
    ("merged lines lose their periods", "好的。\n收到。\n明白。", 2, ("好的", "收到 明白")),
    ("one bubble", "早\n吃了吗\n今天好冷", 1, ("早 吃了吗 今天好冷",)),
    (
        "merged code keeps its own lines",
        "一\n二\n三\n```\nx\n```\n好了",
        3,
        ("一", "二", "三\n```\nx\n```\n好了"),
    ),
    (
        "pieces of one line rejoin as written",
        "第一\n" + LONG_LINE,
        2,
        ("第一", LONG_LINE),
    ),
]


@pytest.mark.parametrize(
    ("text", "max_bubbles", "bubbles"),
    [case[1:] for case in BUBBLE_CASES],
    ids=[case[0] for case in BUBBLE_CASES],
)
def test_split_into_bubbles(text: str, max_bubbles: int, bubbles: tuple[str, ...]) -> None:
    assert split_into_bubbles(text, max_bubbles=max_bubbles) == bubbles


def test_shape_uses_the_same_bubbles() -> None:
    shaped = shape_reply("[#7] 好\n等我一下。", max_bubbles=3)
    assert shaped.bubbles == split_into_bubbles("好\n等我一下。", max_bubbles=3)
    assert shaped.text == "好\n等我一下"


# (case, raw reply, max_chars, text)
CAP_CASES: list[tuple[str, str, int, str]] = [
    ("under the cap", "今天天气真好。", 20, "今天天气真好"),
    (
        "cut on a sentence end",
        "今天天气真好。我们去爬山吧！山上风景特别漂亮，还有好吃的。",
        20,
        "今天天气真好。我们去爬山吧！…",
    ),
    (
        "period replaced by the ellipsis",
        "第一句话。第二句话。第三句话。",
        12,
        "第一句话。第二句话…",
    ),
    ("no boundary: hard cut", "哈" * 30, 10, "哈" * 9 + "…"),
    ("one character", "好的好的", 1, "…"),
]


@pytest.mark.parametrize(
    ("raw", "max_chars", "text"),
    [case[1:] for case in CAP_CASES],
    ids=[case[0] for case in CAP_CASES],
)
def test_text_is_capped(raw: str, max_chars: int, text: str) -> None:
    shaped = shape_reply(raw, max_chars=max_chars)
    assert shaped.text == text
    assert len(shaped.text) <= max_chars
    assert ("truncated" in shaped.removed) == (len(raw) > max_chars)


MEGABYTE = 1_000_000

# Inputs built to trip naive patterns: long runs, unbalanced openers, markup floods.
HOSTILE: list[tuple[str, str]] = [
    ("chinese prose", "今天天气不错。" * (MEGABYTE // 7)),
    ("one long line", "哈" * MEGABYTE),
    ("spaces then a word", " " * MEGABYTE + "好"),
    ("newlines", "\n" * MEGABYTE + "好"),
    ("angle brackets", "<" * MEGABYTE),
    ("unclosed tool tags", "<tool_call " * (MEGABYTE // 11)),
    ("unclosed tool block", "好\n<tool_call>" + "{" * MEGABYTE),
    ("unclosed bracket markers", "[表情:" * (MEGABYTE // 4)),
    ("unclosed tag markers", "<emoji>" * (MEGABYTE // 7)),
    ("think closers", "</think>" * (MEGABYTE // 8)),
    ("unbalanced quotes", "「" * MEGABYTE),
    ("backticks", "`" * MEGABYTE),
    ("fences", "```\n" * (MEGABYTE // 4)),
    ("special token openers", "<|" * (MEGABYTE // 2)),
    ("dsml openers", "<｜DSML｜" * (MEGABYTE // 7)),
    ("ids", "#1" * (MEGABYTE // 2)),
    ("url", "https://" + "a" * MEGABYTE),
    (
        "mixed lines",
        "[#12] 牛牛：<say>好[表情:开心]</say>「引用。」https://a.cn/?x=1!\n" * (MEGABYTE // 50),
    ),
]


@pytest.mark.parametrize("raw", [case[1] for case in HOSTILE], ids=[case[0] for case in HOSTILE])
def test_hostile_input_is_shaped_within_limits(raw: str) -> None:
    # How fast: bench/text_protocol_bench.py (reply shaping part), never a timed assertion.
    shaped = shape_reply(raw, bot_names=BOT, max_bubbles=4, max_chars=1500)
    split_into_bubbles(raw, max_bubbles=4)
    assert len(shaped.bubbles) <= 4
    assert len(shaped.text) <= 1500
    assert all(bubble.strip() for bubble in shaped.bubbles)
    assert len(shaped.intents) <= MAX_INTENTS
    assert shaped.text == "\n".join(shaped.bubbles)


def test_shaped_reply_empty() -> None:
    assert ShapedReply(text="", bubbles=(), intents=(), removed=()).empty
    assert not ShapedReply(text="好", bubbles=("好",), intents=(), removed=()).empty


def test_removed_kinds_are_plain_strings() -> None:
    shaped = shape_reply("<think>x</think>[#1] 牛牛：好" + "啊" * 50, bot_names=BOT, max_chars=10)
    assert shaped.removed == (
        "think_block",
        "message_id_prefix",
        "speaker_prefix",
        "truncated",
    )
    assert all(isinstance(kind, str) for kind in shaped.removed)
    assert set(shaped.removed) <= set(RemovedKind)


@pytest.mark.parametrize(
    ("max_bubbles", "max_chars"), [(0, 1500), (4, 0)], ids=["no bubbles", "no chars"]
)
def test_limits_must_allow_a_reply(max_bubbles: int, max_chars: int) -> None:
    with pytest.raises(ValueError):
        shape_reply("好", max_bubbles=max_bubbles, max_chars=max_chars)
