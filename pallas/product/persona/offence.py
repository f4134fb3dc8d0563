"""The model's own judgment of an attack, when a turn runs anyway (docs/persona.md).

The word lists catch plain insults before any turn (watch.py). What they miss, the model may
name in the turn it runs anyway: a `[冒犯:…]` marker in its reply or in its silence's reason.
That counts as one attack by the batch's writer, by the same rules (attacks.judged_attack:
never an owner, never a close friend, never twice for messages the word lists already
counted), and goes through the same rage, silence and blacklist as any other.
"""

from __future__ import annotations

from collections.abc import Callable

from pallas.core.inbound import StreamKind
from pallas.product.conversation.turns.turn import Turn
from pallas.product.llm.agent.output import IntentKind
from pallas.product.llm.agent.reply_forms import FormContext
from pallas.product.persona.attacks import judged_attack
from pallas.product.persona.favor import cooled, tier_of
from pallas.product.persona.store import attacks_noted
from pallas.product.persona.watch import WatchDeps, angered

HOW_TO = (
    "有人恶意辱骂、攻击你（不是开玩笑）时，"
    "在 reply 的 text 或 silent 的 reason 里加上 [冒犯:一句理由]"
)


class OffenceListener:
    name = "offence"

    def __init__(self, deps: WatchDeps) -> None:
        self._deps = deps

    async def heard(self, context: FormContext) -> None:
        reasons = [i.value for i in context.intents if i.kind is IntentKind.OFFENCE]
        theirs = [m for m in context.turn.messages if not m.message.from_bot]
        if not reasons or not theirs or not self._deps.rage().judging:
            return
        deps, last = self._deps, theirs[-1]
        if await attacks_noted(deps.engine, [m.message_id for m in theirs]):
            return  # the word lists already counted these words
        self_id, person = last.message.stream.self_id, last.sender_person_id
        score, warmed_on = await deps.store.favorability(self_id, person)
        owner = last.message.sender.user_id in deps.owners
        attack = judged_attack(reasons[0], owner=owner, tier=tier_of(score))
        if attack is None:
            return
        now = context.now
        await deps.store.set_favorability(
            self_id, person, cooled(score, attack.favor_loss), warmed_on, now
        )
        await angered(last, attack, now, deps)


class OffenceLines:
    """The persona's state line telling the model how to say it was attacked (not to owners)."""

    def __init__(self, owners: frozenset[str], judging: Callable[[], bool] = lambda: True) -> None:
        self._owners = owners
        self._judging = judging  # asked each turn: the console may switch it

    async def lines(self, turn: Turn) -> list[str]:
        if not self._judging():
            return []
        theirs = [m for m in turn.messages if not m.message.from_bot]
        if not theirs or any(m.message.sender.user_id in self._owners for m in theirs):
            return []
        if turn.stream.kind is StreamKind.GROUP and not turn.disposition.is_direct_call:
            return []  # words not aimed at the bot are not an attack on it
        return [HOW_TO]
