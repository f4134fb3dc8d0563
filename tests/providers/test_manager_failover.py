"""Selection, failover, circuit breaking and key rotation against a real HTTP server."""

from __future__ import annotations

import asyncio
import socket
from collections import Counter

import pytest

from pallas.providers.catalog import BreakerPolicy, ModelType, ProviderSpec
from pallas.providers.errors import (
    AllCandidatesFailedError,
    FailureKind,
    ModelRejectedError,
)
from pallas.providers.results import CallTag, Purpose
from tests.providers.support import HELLO, catalog, harness, model
from tests.support.fake_llm import (
    BrokenStream,
    EmptyChoices,
    FakeModelServer,
    Reply,
    Stall,
    Status,
)

TAG = CallTag(Purpose.REPLY)
EMBED = CallTag(Purpose.EMBEDDING)

HANG_GUARD_S = 60.0  # only a broken timeout reaches this


def kinds(error: AllCandidatesFailedError) -> list[tuple[str, FailureKind]]:
    return [(f.model, f.kind) for f in error.failures]


async def test_the_preferred_model_answers_every_call(model_server: FakeModelServer) -> None:
    preferred = ((ModelType.CHAT, "b"),)
    h = harness(catalog(model_server, [model("a"), model("b"), model("c")], preferred=preferred))
    for _ in range(20):
        assert (await h.manager.chat(HELLO, tag=TAG)).model == "b"
    h.manager.set_preferred(ModelType.CHAT, None)
    spread = Counter([(await h.manager.chat(HELLO, tag=TAG)).model for _ in range(60)])
    assert set(spread) == {"a", "b", "c"}
    await h.manager.close()


async def test_embedding_always_uses_the_first_registered_model(
    model_server: FakeModelServer,
) -> None:
    vec_a, vec_b = model("vec-a", ModelType.EMBEDDING), model("vec-b", ModelType.EMBEDDING)
    h = harness(catalog(model_server, [vec_a, vec_b]))
    for _ in range(10):
        assert (await h.manager.embed(["x"], tag=EMBED)).model == "vec-a"
    # Never a silent switch to another vector space, not even on failure.
    model_server.script("up-vec-a", Status(500))
    with pytest.raises(AllCandidatesFailedError) as caught:
        await h.manager.embed(["x"], tag=EMBED)
    assert kinds(caught.value) == [("vec-a", FailureKind.SERVER_ERROR)]
    assert model_server.requests_for("up-vec-b") == []
    await h.manager.close()


@pytest.mark.parametrize(
    ("answer", "kind"),
    [
        (Status(500), FailureKind.SERVER_ERROR),
        (Status(503), FailureKind.SERVER_ERROR),
        (Status(429), FailureKind.RATE_LIMITED),
        (BrokenStream(garbage="{not json"), FailureKind.MALFORMED_RESPONSE),
        (BrokenStream(), FailureKind.MALFORMED_RESPONSE),
        (EmptyChoices(), FailureKind.MALFORMED_RESPONSE),
    ],
)
@pytest.mark.parametrize("stream", [False, True])
async def test_a_failing_model_hands_over_to_the_next(
    model_server: FakeModelServer, answer: object, kind: FailureKind, stream: bool
) -> None:
    preferred = ((ModelType.CHAT, "a"),)
    h = harness(catalog(model_server, [model("a"), model("b")], preferred=preferred))
    model_server.script("up-a", answer)  # type: ignore[arg-type]
    model_server.script("up-b", Reply("备用模型在此"))
    result = await h.manager.chat(HELLO, tag=TAG, stream=stream)
    assert (result.text, result.model, result.attempts) == ("备用模型在此", "b", 2)
    assert [(r.model, r.outcome, r.attempt) for r in h.rows] == [
        ("a", kind.value, 1),
        ("b", "ok", 2),
    ]
    assert h.rows[0].error and h.rows[0].cost == 0
    await h.manager.close()


async def test_a_stall_ends_at_the_timeout_and_fails_over(model_server: FakeModelServer) -> None:
    preferred = ((ModelType.CHAT, "a"),)
    h = harness(catalog(model_server, [model("a"), model("b")], timeout_s=0.5, preferred=preferred))
    model_server.script("up-a", Stall())
    # The stall never ends by itself: only the timeout can end this call (the outer bound
    # just keeps a broken timeout from hanging the suite).
    result = await asyncio.wait_for(h.manager.chat(HELLO, tag=TAG), HANG_GUARD_S)
    assert result.model == "b"
    assert h.rows[0].outcome == "timeout"
    await h.manager.close()


@pytest.mark.parametrize("stream", [False, True])
async def test_when_every_model_times_out_the_error_says_so(
    model_server: FakeModelServer, stream: bool
) -> None:
    h = harness(catalog(model_server, [model("a"), model("b")], timeout_s=0.4))
    model_server.script("up-a", Reply(delay_s=5))
    model_server.script("up-b", Stall())
    with pytest.raises(AllCandidatesFailedError) as caught:
        await h.manager.chat(HELLO, tag=TAG, stream=stream)
    assert caught.value.timed_out
    assert sorted(kinds(caught.value)) == [
        ("a", FailureKind.TIMEOUT),
        ("b", FailureKind.TIMEOUT),
    ]
    assert "a: timeout" in str(caught.value) and "b: timeout" in str(caught.value)
    await h.manager.close()


async def test_an_unreachable_provider_is_a_connection_error_and_fails_over(
    model_server: FakeModelServer,
) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        dead_port = probe.getsockname()[1]
    dead = ProviderSpec("dead", f"http://127.0.0.1:{dead_port}/v1", ("k",), (), 2.0)
    h = harness(
        catalog(
            model_server,
            [model("gone", provider="dead"), model("b")],
            preferred=((ModelType.CHAT, "gone"),),
            extra_providers=[dead],
        )
    )
    result = await h.manager.chat(HELLO, tag=TAG)
    assert result.model == "b"
    assert h.rows[0].outcome == "connection_error"
    await h.manager.close()


@pytest.mark.parametrize(
    ("code", "kind"),
    [(401, FailureKind.AUTH_ERROR), (403, FailureKind.AUTH_ERROR), (400, FailureKind.BAD_REQUEST)],
)
async def test_a_rejected_request_is_a_configuration_error_without_failover(
    model_server: FakeModelServer, code: int, kind: FailureKind
) -> None:
    preferred = ((ModelType.CHAT, "a"),)
    h = harness(catalog(model_server, [model("a"), model("b")], preferred=preferred))
    model_server.script("up-a", Status(code, "Incorrect API key provided"))
    with pytest.raises(ModelRejectedError) as caught:
        await h.manager.chat(HELLO, tag=TAG)
    assert caught.value.failure.kind is kind
    assert "provider p" in str(caught.value) and "Incorrect API key" in str(caught.value)
    assert model_server.requests_for("up-b") == []
    assert [r.outcome for r in h.rows] == [kind.value]
    # A rejection does not rest the model: fixing the key takes effect on the next call.
    assert (await h.manager.chat(HELLO, tag=TAG)).model == "a"
    await h.manager.close()


async def test_retry_after_rests_a_model_for_that_long(model_server: FakeModelServer) -> None:
    preferred = ((ModelType.CHAT, "a"),)
    h = harness(catalog(model_server, [model("a"), model("b")], preferred=preferred))
    model_server.script("up-a", Status(429, retry_after="20"))
    assert (await h.manager.chat(HELLO, tag=TAG)).model == "b"
    h.clock.now += 19
    assert (await h.manager.chat(HELLO, tag=TAG)).model == "b"
    assert len(model_server.requests_for("up-a")) == 1  # not asked again while resting
    h.clock.now += 1.5
    assert (await h.manager.chat(HELLO, tag=TAG)).model == "a"
    await h.manager.close()


async def test_a_short_retry_after_on_the_only_model_is_waited_out(
    model_server: FakeModelServer,
) -> None:
    h = harness(catalog(model_server, [model("a")]))
    model_server.script("up-a", Status(429, retry_after="2"), Reply("等到了"))
    result = await h.manager.chat(HELLO, tag=TAG)
    assert (result.text, result.attempts) == ("等到了", 2)
    assert h.clock.slept == [2.0]
    # A long one is not waited for: the call fails at once and names the cause.
    model_server.script("up-a", Status(429, retry_after="120"))
    with pytest.raises(AllCandidatesFailedError) as caught:
        await h.manager.chat(HELLO, tag=TAG)
    assert kinds(caught.value) == [("a", FailureKind.RATE_LIMITED)]
    assert caught.value.failures[0].retry_after_s == 120
    assert h.clock.slept == [2.0]
    await h.manager.close()


async def test_a_model_that_keeps_failing_rests_then_is_tried_again(
    model_server: FakeModelServer,
) -> None:
    breaker = BreakerPolicy(failures_to_open=2, cooldown_s=30)
    preferred = ((ModelType.CHAT, "a"),)
    h = harness(
        catalog(model_server, [model("a"), model("b")], preferred=preferred, breaker=breaker)
    )
    model_server.script("up-a", Status(500), Status(500))
    for _ in range(2):
        assert (await h.manager.chat(HELLO, tag=TAG)).model == "b"
    for _ in range(5):  # open: a is skipped without a request
        assert (await h.manager.chat(HELLO, tag=TAG)).model == "b"
    assert len(model_server.requests_for("up-a")) == 2
    h.clock.now += 31
    assert (await h.manager.chat(HELLO, tag=TAG)).model == "a"
    await h.manager.close()


async def test_when_the_only_model_rests_calls_fail_fast_naming_the_breaker(
    model_server: FakeModelServer,
) -> None:
    breaker = BreakerPolicy(failures_to_open=1, cooldown_s=30)
    h = harness(catalog(model_server, [model("a")], breaker=breaker))
    model_server.script("up-a", Status(502))
    with pytest.raises(AllCandidatesFailedError):
        await h.manager.chat(HELLO, tag=TAG)
    with pytest.raises(AllCandidatesFailedError) as caught:
        await h.manager.chat(HELLO, tag=TAG)
    assert kinds(caught.value) == [("a", FailureKind.CIRCUIT_OPEN)]
    assert "resting 30.0 s" in str(caught.value)
    assert len(model_server.requests) == 1
    await h.manager.close()


async def test_several_keys_take_turns(model_server: FakeModelServer) -> None:
    h = harness(catalog(model_server, [model("a")], keys=("sk-1", "sk-2", "sk-3")))
    for _ in range(6):
        await h.manager.chat(HELLO, tag=TAG)
    assert [r.api_key for r in model_server.requests] == ["sk-1", "sk-2", "sk-3"] * 2
    await h.manager.close()
