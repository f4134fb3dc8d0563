"""The observation queue's filter: which new lines might hold something worth remembering.

Pure and cheap, so a run with nothing promising ends without a model call; the model then
decides, and by default remembers nothing. The filter errs towards letting a line through:
a missed line is lost for good, a line let through costs only a share of one call per chat
and slot. Measured on a labelled corpus (tests/fixtures/memory_lines.tsv, docs/memory.md):
`bench/memory_filter_bench.py` prints its recall and pass rate.

A line passes in one of three ways:
- the speaker about themselves (我, 偶, 俺, 本人, I'm...), unless it is a short line about
  a passing state (我饿了, 我在路上, 我刚到家); a lasting cue (过敏, 从来, 一直, 每周, my
  family, pets, work, a plan...) passes it anyway, and passes a line without a subject too
  (坐标杭州, 湖南人，从小吃辣, 下个月要去云南);
- the group agreeing on something (群里以后…, 大家说好了…, 群规…, 本群是…);
- people telling the bot how to behave (回复短一点, 机器人以后别…, 叫我老王).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

from pallas.store.conversation import WindowLine

MIN_CHARS = 3
MAX_CHARS = 300  # longer lines are pastes, not self-descriptions
PASSING_MAX_CHARS = 25

_COMMAND = re.compile(r"^\s*[/!！#]")
_SHARE = re.compile(r"^\s*(?:\[[^\]]{1,8}\]|【[^】]{1,12}】)|https?://")  # a share, a link

# Asking the bot to remember (also what earns a refused teacher a notice, teachers.py); not
# 记得 ("我记得…", "你还记得吗"), which is recalling.
ASKED_TO_REMEMBER = re.compile(r"记住|记下来|记一下|帮我记|别忘了|remember", re.IGNORECASE)
# Who the line is about.
_SELF = re.compile(
    r"我|偶|俺|鹅|窝|本人|咱|人家|阿拉|自己|老子|\b(?:i|i'm|im|my|me|mine)\b", re.IGNORECASE
)
_GROUP = re.compile(
    r"群|大家|各位|咱们|我们|以后|今后|往后|从今天起|说好|约好|规定|统一|新人|每周|每个?月"
)
_BOT = re.compile(
    r"bot|机器人|帕拉斯|pallas|回我|跟我说话|和我说话|对我说|说话|讲话|回复|回答|语气|接话|插嘴"
    r"|你(?:以后|今后|回复|回答|说话|的回复|别|不要|少|多|能不能|可不可以|可以|就|直接)"
)

# What makes it last. Strong cues pass a line even beside a passing-state word.
_STRONG = re.compile(
    r"过敏|不能吃|忌口|吃素|素食|从来|从不|向来|一直|一向|每天|每周|每个?月|每年|平时|平常|通常"
    r"|一般|基本|经常|总是|老是|证书|资格证|驾照|我家|我们家|俺家|我屋|家里|都有|必须|怕"
    r"|小名|外号|网名|昵称|绰号|花名|真名|住(?!院)|[省市县]人|人$|人[，,。!！ ]"
    r"|只(?:喝|吃|用|穿|听|看|玩|会)|[吃喝]不了|在.{1,10}(?:上班|工作|上学|读书|住|长大|定居)"
    r"|习惯|老家|祖籍|家乡|坐标|土生土长|属[鼠牛虎兔龙蛇马羊猴鸡狗猪]|[0-9零〇一二三四五六七八九]{2}年的"
    r"|[0-9零〇一二三四五六七八九]{2}后|星座|[^\s]{2}座\b|岁|生日|血型|mbti|[ie]人|社恐|社牛"
    r"|左撇子|近视|色弱|色盲|失眠|晕车|恐高|单身|结婚|离婚|订婚|异地|对象|老婆|老公|媳妇|男朋友"
    r"|女朋友|儿子|女儿|闺女|孩子|娃|爸|妈|爹|娘|哥|姐|弟|妹|爷爷|奶奶|外公|外婆|姥姥|姥爷"
    r"|家人|全家|猫|狗|兔|鹦鹉|仓鼠|鱼缸|宠物|毕业|本科|研[一二三]|研究生|读研|博士|大[一二三四]"
    r"|高[一二三]|初[一二三]|小学|专业|学校|公司|上班|工作|职业|行业|创业|开了(?:家|个)|做.{0,4}的"
    r"|当.{0,4}(?:师|员|生|兵)|打算|计划|准备|下个?月|明年|今年|年底|下半年|暑假|寒假|过阵子"
    r"|以后|将来|vegetarian|vegan|allergic|night owl|work|live|from\b",
    re.IGNORECASE,
)
# A passing state, a momentary want or a bit of chatter: not worth a call on its own.
_PASSING = re.compile(
    r"今天|今晚|今早|昨天|昨晚|前天|刚|现在|这会|此刻|马上|等会|待会|一会|先|正在|在路上|在呢"
    r"|了吗|到了|来了|走了|去了|完了|下线|上线|睡了|饿|饱|困|累|烦死|无聊|无语|麻了|破防|服了"
    r"|emo|慌|开心|心情|笑死|想睡|好想|超想|特别想|真想|很想|想吃|想喝|想去|想看|也是|也想"
    r"|也觉得|也好|也在|也刚|觉得|感觉|猜|怀疑|看看|查一下|试试|帮我|给我|能帮|谁有空|去看|等你"
    r"|不到啊|不会吧|不行了|不去了|不玩了|不想|这个表情|这首歌|这部|这个剧|这一段|这把|这局"
    r"|是不是|是谁|是第一|是来|是说|[?？]$|吗$|我去(?!过|年)|中午|下午|晚点|晚上|抢到|掉段|懂了"
    r"|就问问|没有$|手机|人傻|栓q|蚌埠|不懂|在(?:看|听|改|刷|打|玩|写|吃|喝|等|开|排队|上课|床上"
    r"|楼下|公司|医院|高铁|车上|地铁)",
    re.IGNORECASE,
)
# A line that sets a lasting rule for the group or a manner for the bot.
_RULE = re.compile(
    r"群规|公告|禁止|不许|不准|严禁|以后|今后|从今天起|往后|每周|每个?月|说好|约好|统一|记得|记住"
    r"|别忘了|一律|必须|先.{1,6}再|要加|都要|都得|别(?:每次|老是|总是|太|带|用|卖萌|再)"
    r"|不要(?:每次|老是|总是|太|带|用|再)|(?:短|长|简单|正经|少|慢)一?点|以内|用.{1,4}(?:回复|回答)"
    r"|叫我|称呼我|喊我|进群|群名片|[点些]$|[点些][，,。!！]|用(?:中文|英文|繁体|简体|普通话)"
)
# Cues that say who and what without a subject: "坐标杭州", "本人律师", "打小不吃葱".
_SUBJECTLESS = re.compile(
    r"坐标|本人|祖籍|打小|从小|土生土长|人在|base|定居|常驻|搬到|搬去|叫我|喊我|称呼我"
    r"|(?:本群|咱群|咱们群|我们群|这个群|这群|群里)(?:的人|成员|都|主要|大多|是|有|成立|建)"
)
_PLAN = re.compile(
    r"(?:下个?月|明年|下半年|暑假|寒假|年底|过阵子|月底|国庆|五一|过年).{0,6}(?:要|准备|打算|去|回)"
)


def is_candidate(text: str) -> bool:
    normal = unicodedata.normalize("NFKC", text).strip()
    if not MIN_CHARS <= len(normal) <= MAX_CHARS or _COMMAND.match(normal):
        return False
    if ASKED_TO_REMEMBER.search(normal):  # the model decides, and the guard, what is kept
        return True
    if _SHARE.search(normal) and not _SELF.search(normal) and not _RULE.search(normal):
        return False
    if (_GROUP.search(normal) or _BOT.search(normal)) and _RULE.search(normal):
        return True
    if _PLAN.search(normal) or _SUBJECTLESS.search(normal):
        return True
    # In a long line a passing word is usually the story around a fact, not the point.
    passing = len(normal) <= PASSING_MAX_CHARS and _PASSING.search(normal)
    if _STRONG.search(normal):  # 我 is often left out: "湖南人，从小吃辣"
        return bool(_SELF.search(normal) or not passing)
    return bool(_SELF.search(normal) and not passing)


def pick_candidates(lines: Sequence[WindowLine], after_id: int, limit: int) -> list[WindowLine]:
    """The newest `limit` lines after the cursor that people (not the bot) wrote and that
    pass the filter, oldest first."""
    fresh = [
        line
        for line in lines
        if line.message_id > after_id
        and not line.from_bot
        and not line.recalled
        and not line.suppressed
        and not line.is_poke
        and is_candidate(line.text)
    ]
    return fresh[-limit:] if limit > 0 else []
