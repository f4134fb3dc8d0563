"""The quote rule: code, not the model, decides whether a reply quotes its target (pure)."""

from __future__ import annotations

import pytest

from pallas.core.inbound import StreamKind
from pallas.product.conversation.delivery.contract import should_quote


@pytest.mark.parametrize(
    ("kind", "target", "newest", "quote"),
    [
        (StreamKind.GROUP, 10, 12, True),
        (StreamKind.GROUP, 11, 12, True),
        (StreamKind.GROUP, 12, 12, False),
        (StreamKind.GROUP, None, 12, False),
        (StreamKind.PRIVATE, 10, 12, False),
        (StreamKind.PRIVATE, 12, 12, False),
    ],
    ids=[
        "others spoke since the target",
        "one message landed after the target",
        "the reply sits right under its target",
        "no target",
        "never in a private chat",
        "private, right under the target",
    ],
)
def test_a_reply_quotes_only_a_target_buried_in_a_group(
    kind: StreamKind, target: int | None, newest: int, quote: bool
) -> None:
    assert should_quote(kind, target, newest) is quote
