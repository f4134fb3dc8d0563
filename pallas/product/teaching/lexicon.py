"""Word lists for the teaching guard (guard.py): what the bot will not keep in memory.

The lists are deliberately conservative: short, and biased towards words that are rarely
innocent in a group chat, because the guard reads every candidate and its source messages.
A missed insult costs one bad memory an owner can forget; a false hit only refuses a memory.
Owners may extend them later (stored per group); these are the built-in floor.

Entries are stored already normalised the way the guard normalises text (NFKC, lowercase,
no spaces or punctuation); a test checks that. ASCII entries are matched as whole Latin
words (so "sb" never hits "usb"); the others as substrings of the squeezed text.
"""

from __future__ import annotations

# Profanity and insults: refused wherever they appear, in the candidate or in its source.
# Left out on purpose: mild exclamations said as often as "damn" (卧槽, 我靠), and single
# characters with common innocent uses (操 in 操作, 逼 in 逼近, 日 in 生日你...).
VULGAR_WORDS: frozenset[str] = frozenset(
    {
        # 傻逼 and its spellings
        "傻逼",
        "傻b",
        "傻比",
        "傻批",
        "傻屄",
        "煞笔",
        "煞逼",
        "沙比",
        "sb",
        "shabi",
        "憨批",
        # mothers and the like
        "妈的",
        "他妈的",
        "tmd",
        "特么的",
        "妈逼",
        "妈了个逼",
        "你妈死了",
        "死妈",
        "尼玛",
        "nmsl",
        "nmb",
        "rnm",
        "mdzz",
        # 操 / 草 / 日 with an object
        "操你",
        "操你妈",
        "草你妈",
        "艹你",
        "草泥马",
        "曹尼玛",
        "cnm",
        "cnmb",
        "wcnm",
        "caonima",
        "日你妈",
        "日你大爷",
        "日你先人",
        "日了狗",
        "肏",
        "屄",
        "鸡巴",
        # insults
        "狗日",
        "狗娘养的",
        "狗东西",
        "王八蛋",
        "龟儿子",
        "杂种",
        "贱人",
        "贱货",
        "婊子",
        "绿茶婊",
        "脑残",
        "你麻痹",
        # wishing harm
        "去死吧",
        "你去死",
        "快去死",
        "滚蛋",
        "滚犊子",
        # English
        "fuck",
        "fucking",
        "fucker",
        "fucked",
        "motherfucker",
        "shit",
        "bitch",
        "asshole",
        "cunt",
    }
)

# Innocent phrases that contain a vulgar entry; they are blanked out before matching.
HARMLESS_PHRASES: frozenset[str] = frozenset(
    {
        "我妈的",  # "my mother's ..."
        "咱妈的",
        "俺妈的",
        "死海",  # 他去死海玩了
    }
)

# Words that belittle a person. They are harmless alone (猪 is food, 垃圾 is rubbish), so
# the guard refuses them only inside a teaching that someone "is" or "is called" one of
# them (guard.py, BELITTLING). Milder than VULGAR_WORDS on purpose.
BELITTLING_WORDS: frozenset[str] = frozenset(
    {
        "猪",
        "蠢猪",
        "狗",
        "傻狗",
        "舔狗",
        "笨蛋",
        "笨猪",
        "蠢",
        "蠢货",
        "蠢蛋",
        "笨",
        "废物",
        "废柴",
        "垃圾",
        "白痴",
        "弱智",
        "智障",
        "低能",
        "脑瘫",
        "傻子",
        "傻瓜",
        "傻帽",
        "二货",
        "二百五",
        "呆子",
        "丑八怪",
        "死胖子",
        "神经病",
        "变态",
        "小丑",
        "菜鸡",
        "loser",
        "idiot",
        "stupid",
        "dumb",
        "moron",
        "trash",
        "retard",
        "pig",
        "fool",
    }
)
