"""The audit vocabulary: every kind of event the bot writes to the `event` table.

One row per decision, with the turn, message or outbox row it concerns and a reason word;
docs/architecture.md ("The audit trail") lists the reasons. Values are stored as text, so a
kind is renamed only together with a migration of the rows already written.
"""

from __future__ import annotations

from enum import StrEnum


class EventKind(StrEnum):
    # ingress (the timeline writer) and the stage list
    INBOUND = "inbound"  # a new message from someone else was stored
    INBOUND_DUPLICATE = "inbound_duplicate"  # the platform delivered a stored message again
    MESSAGE_RECALLED = "message_recalled"  # a recall notice (the row stays, flagged)
    MEMBER_JOINED = "member_joined"  # group_increase
    MEMBER_LEFT = "member_left"  # group_decrease
    GROUP_NOTICE = "group_notice"  # essence, card, ban, title, rename, admin, upload, likes
    STAGE_HANDLED = "stage_handled"  # a stage answered the message; later stages skipped
    STAGE_SUPPRESSED = "stage_suppressed"  # silenced: stored and flagged, nobody acts on it
    STAGE_FAILED = "stage_failed"  # a stage raised; the message went on to the next stage
    STAGE_ACTED = "stage_acted"  # a stage acted (a poke back) and let the next stages see it
    ATTACK_NOTED = "attack_noted"  # someone attacked the bot: rage rose (reason: the outcome)
    # the gate and the turn buffers
    GATE_PASSED = "gate_passed"  # the gate let the message (or a batch) through, with its rule
    GATE_DROPPED = "gate_dropped"  # the gate dropped it, with the rule (or stale_at_restart)
    TURN_COMPETITION = "turn_competition"  # a turn could not start: another holds the chat
    # a turn
    TURN_STARTED = "turn_started"  # a turn took a batch of messages
    CONTEXT_ASSEMBLED = "context_assembled"  # what the model was shown (sizes, trigger)
    TOOL_CALLED = "tool_called"  # a tool ran inside the turn, with its outcome
    AGENT_DECIDED = "agent_decided"  # the model's terminal action, validated
    AGENT_FAILED = "agent_failed"  # no valid decision (model, protocol or validation failure)
    MODEL_UNAVAILABLE = "model_unavailable"  # no chat model answered; a fallback may follow
    REPLY_INTENT = "reply_intent"  # the decision said more than its text (e.g. a wait hint)
    STICKER_MISSED = "sticker_missed"  # a sticker was wanted (the reason: the feeling), none fit
    REPLY_QUEUED = "reply_queued"  # a reply and its outbox rows were committed
    ACTION_QUEUED = "action_queued"  # a poke or a reaction was committed to the outbox
    ACTION_REFUSED = "action_refused"  # the outbox refused a decided action it cannot send
    TURN_FINISHED = "turn_finished"  # the turn ended normally (replied, acted or silent)
    TURN_FAILED = "turn_failed"  # the turn ended with an error
    TURN_WAITING = "turn_waiting"  # the model chose to wait for more messages
    TURN_INTERRUPTED = "turn_interrupted"  # found cut by a crash at start-up (retry/given_up)
    # the way out
    DELIVERED = "delivered"  # the platform confirmed an outbox row (receipt or echo)
    DELIVERY_RETRY = "delivery_retry"  # a send got no confirmation; tried again later
    DELIVERY_FAILED = "delivery_failed"  # given up after the last attempt
    DELIVERY_EXPIRED = "delivery_expired"  # waited too long to be worth sending
    DELIVERY_DROPPED = "delivery_dropped"  # an unsolicited reply given up (backpressure)
    DELIVERY_RECOVERED = "delivery_recovered"  # a send cut by a crash, settled at start-up
    # A disconnected or removed account's row, sent through another account in the group.
    DELIVERY_HANDED_OVER = "delivery_handed_over"
    OUTGOING_BLOCKED = "outgoing_blocked"  # the outgoing screen refused a message (its rule)
    OUTGOING_REWRITTEN = "outgoing_rewritten"  # ... or masked part of it (its rules)
    # The bot's own initiative (docs/persona.md)
    FOLLOW_UP_SKIPPED = "follow_up_skipped"  # a private follow-up's time came; not taken (why)
    PROMISE_MADE = "promise_made"  # an owner's promise was kept in the store (timed / untimed)
    PROMISE_REFUSED = "promise_refused"  # a promise not kept (not_owner, disabled, no_text)


TURN_ENDINGS = (
    EventKind.TURN_FINISHED,
    EventKind.TURN_FAILED,
    EventKind.TURN_WAITING,
    EventKind.TURN_INTERRUPTED,
)
# A message has been decided on once one of these names it (start-up re-decides the rest).
MESSAGE_DECISIONS = (
    EventKind.GATE_PASSED,
    EventKind.GATE_DROPPED,
    EventKind.STAGE_HANDLED,
    EventKind.STAGE_SUPPRESSED,
)
