"""Speech to text and text to speech through the manager, against a real HTTP server."""

from __future__ import annotations

import asyncio
import io
import wave
from datetime import UTC, datetime
from pathlib import Path

import pytest
from openai.types.audio import Transcription
from openai.types.audio.transcription import UsageDuration, UsageTokens

from pallas.providers.call_log import CallLog
from pallas.providers.catalog import ModelType, Pricing
from pallas.providers.errors import (
    AllCandidatesFailedError,
    FailureKind,
    ModelRejectedError,
    NoModelError,
)
from pallas.providers.estimate import estimate_tokens
from pallas.providers.manager import ManagerDeps, ModelManager
from pallas.providers.openai_wire import RawUsage, transcription_usage
from pallas.providers.results import CallTag, Purpose
from pallas.store.llm_usage import LlmCallRow
from tests.providers.support import catalog, harness, model
from tests.support.fake_llm import (
    SILENT_WAV,
    SPEECH_PATH,
    TRANSCRIPTIONS_PATH,
    BrokenStream,
    EmptyChoices,
    FakeModelServer,
    Reply,
    Scripted,
    Stall,
    Status,
    silent_wav,
)

HEAR = CallTag(Purpose.TRANSCRIPTION, turn_id=7, stream_key="group:1")
SAY = CallTag(Purpose.SPEECH, turn_id=8, stream_key="group:1")
VOICE_NOTE = silent_wav(samples=800)  # not the server's default answer, so a swap would show
HANG_GUARD_S = 60.0  # only a broken timeout reaches this
FAST_TIMEOUT_S = 0.5  # ends a Stall quickly; a loopback answer takes milliseconds

FAULTS: list[tuple[Scripted, FailureKind]] = [
    (Status(500), FailureKind.SERVER_ERROR),
    (Status(429), FailureKind.RATE_LIMITED),
    (BrokenStream(), FailureKind.MALFORMED_RESPONSE),
    (EmptyChoices(), FailureKind.MALFORMED_RESPONSE),
    (Stall(), FailureKind.TIMEOUT),
]


def opened_log(directory: Path) -> tuple[CallLog, Path]:
    log = CallLog(directory, started_at=datetime(2026, 12, 1, 9, 0, tzinfo=UTC))
    return log, log.open()


def outcomes(rows: list[LlmCallRow]) -> list[tuple[str, str]]:
    return [(row.model, row.outcome) for row in rows]


# ----- transcription -----------------------------------------------------------------------


async def test_a_transcription_uploads_the_audio_and_is_accounted_and_logged(
    model_server: FakeModelServer, tmp_path: Path
) -> None:
    log, path = opened_log(tmp_path)
    rows: list[LlmCallRow] = []
    spec = model("ear", ModelType.ASR)
    manager = ModelManager(catalog(model_server, [spec]), ManagerDeps(rows.append, log))
    model_server.script("up-ear", Reply("今晚八点开黑"))
    result = await manager.transcribe(VOICE_NOTE, "语音.wav", tag=HEAR, language="zh")
    await manager.close()
    log.close()

    assert (result.text, result.model, result.cost) == ("今晚八点开黑", "ear", 0.0)
    assert result.usage.prompt_tokens == 0 and not result.usage.estimated
    [request] = model_server.requests
    assert request.path == TRANSCRIPTIONS_PATH and request.api_key == "sk-1"
    assert request.headers["content-type"].startswith("multipart/form-data")
    assert request.body["model"] == "up-ear" and request.body["language"] == "zh"
    assert request.body["response_format"] == "json"
    assert (request.body["filename"], request.body["file_size"]) == ("语音.wav", len(VOICE_NOTE))
    assert request.files["file"] == VOICE_NOTE
    [row] = rows
    assert (row.purpose, row.model_type, row.model, row.outcome) == (
        "transcription",
        "asr",
        "ear",
        "ok",
    )
    assert (row.prompt_tokens, row.completion_tokens, row.cost) == (0, 0, 0.0)
    assert (row.turn_id, row.provider, row.attempt) == (7, "p", 1)
    text = path.read_text(encoding="utf-8")
    assert "type: asr" in text and "purpose: transcription" in text
    assert f"[audio 语音.wav: {len(VOICE_NOTE)} bytes, language zh]" in text
    assert "今晚八点开黑" in text


async def test_silence_transcribes_to_blank_text_and_is_a_success(
    model_server: FakeModelServer,
) -> None:
    h = harness(catalog(model_server, [model("ear", ModelType.ASR)]))
    model_server.script("up-ear", Reply("  "))
    result = await h.manager.transcribe(SILENT_WAV, "silence.wav", tag=HEAR)
    assert result.text == "  "
    assert "language" not in model_server.requests[0].body
    assert outcomes(h.rows) == [("ear", "ok")]
    await h.manager.close()


@pytest.mark.parametrize(("fault", "kind"), FAULTS)
async def test_a_failing_transcription_model_hands_over_to_the_next(
    model_server: FakeModelServer, fault: Scripted, kind: FailureKind
) -> None:
    specs = [model("a", ModelType.ASR), model("b", ModelType.ASR)]
    preferred = ((ModelType.ASR, "a"),)
    h = harness(catalog(model_server, specs, timeout_s=FAST_TIMEOUT_S, preferred=preferred))
    model_server.script("up-a", fault)
    model_server.script("up-b", Reply("听到了"))
    call = h.manager.transcribe(VOICE_NOTE, "v.amr", tag=HEAR)
    result = await asyncio.wait_for(call, HANG_GUARD_S)
    assert (result.text, result.model) == ("听到了", "b")
    assert outcomes(h.rows) == [("a", kind.value), ("b", "ok")]
    assert [row.attempt for row in h.rows] == [1, 2]
    assert [r.files["file"] for r in model_server.requests] == [VOICE_NOTE, VOICE_NOTE]
    await h.manager.close()


async def test_a_rejected_transcription_stops_at_once(model_server: FakeModelServer) -> None:
    specs = [model("a", ModelType.ASR), model("b", ModelType.ASR)]
    h = harness(catalog(model_server, specs, preferred=((ModelType.ASR, "a"),)))
    model_server.script("up-a", Status(401, "bad key"))
    with pytest.raises(ModelRejectedError, match="bad key"):
        await h.manager.transcribe(VOICE_NOTE, "v.wav", tag=HEAR)
    assert model_server.requests_for("up-b") == []
    await h.manager.close()


def test_token_usage_of_a_transcription_is_read_and_per_second_usage_is_not() -> None:
    tokens = UsageTokens(type="tokens", input_tokens=120, output_tokens=30, total_tokens=150)
    answer = Transcription(text="hi", usage=tokens)
    assert transcription_usage(answer.usage) == RawUsage(120, 30, 0)
    assert transcription_usage(UsageDuration(type="duration", seconds=3.5)) is None
    assert transcription_usage(None) is None


# ----- speech ------------------------------------------------------------------------------


async def test_speech_returns_the_served_audio_and_type_and_is_accounted_and_logged(
    model_server: FakeModelServer, tmp_path: Path
) -> None:
    log, path = opened_log(tmp_path)
    rows: list[LlmCallRow] = []
    spec = model("mouth", ModelType.TTS, pricing=Pricing(input=15.0))
    manager = ModelManager(catalog(model_server, [spec]), ManagerDeps(rows.append, log))
    mp3 = b"ID3\x04\x00" + bytes(range(256)) * 4
    model_server.script("up-mouth", Reply(audio=mp3, mime="audio/mpeg"))
    words = "大家晚上好"
    result = await manager.speak(words, tag=SAY, voice="nova")
    await manager.close()
    log.close()

    assert (result.audio, result.mime, result.model) == (mp3, "audio/mpeg", "mouth")
    assert result.usage.estimated and result.usage.prompt_tokens == estimate_tokens(words)
    assert result.cost == pytest.approx(estimate_tokens(words) * 15.0 / 1e6)
    [request] = model_server.requests
    assert request.path == SPEECH_PATH
    assert request.body == {
        "model": "up-mouth",
        "input": words,
        "voice": "nova",
        "response_format": "mp3",
    }
    [row] = rows
    assert (row.purpose, row.model_type, row.outcome, row.turn_id) == ("speech", "tts", "ok", 8)
    assert row.usage_estimated and row.cost == pytest.approx(result.cost)
    text = path.read_text(encoding="utf-8")
    assert words in text and f"[audio audio/mpeg: {len(mp3)} bytes]" in text


async def test_the_default_speech_answer_is_a_playable_wav(model_server: FakeModelServer) -> None:
    h = harness(catalog(model_server, [model("mouth", ModelType.TTS)]))
    result = await h.manager.speak("hello", tag=SAY, response_format="wav")
    assert result.mime == "audio/wav"
    with wave.open(io.BytesIO(result.audio)) as played:
        assert (played.getnchannels(), played.getsampwidth()) == (1, 2)
        assert played.getframerate() == 8_000 and played.getnframes() > 0
    await h.manager.close()


@pytest.mark.parametrize(
    ("served", "asked", "mime"),
    [
        ("application/octet-stream", "opus", "audio/ogg"),
        ("", "mp3", "audio/mpeg"),
        ("audio/flac; charset=binary", "flac", "audio/flac"),
    ],
)
async def test_a_generic_content_type_is_named_after_the_format_asked_for(
    model_server: FakeModelServer, served: str, asked: str, mime: str
) -> None:
    h = harness(catalog(model_server, [model("mouth", ModelType.TTS)]))
    model_server.script("up-mouth", Reply(audio=b"\x01\x02\x03", mime=served))
    result = await h.manager.speak("hi", tag=SAY, response_format=asked)
    assert (result.audio, result.mime) == (b"\x01\x02\x03", mime)
    await h.manager.close()


@pytest.mark.parametrize(
    ("fault", "kind"),
    [
        *FAULTS,
        (Reply(audio=b""), FailureKind.MALFORMED_RESPONSE),
        (
            Reply(audio=b'{"error": "quota"}', mime="application/json"),
            FailureKind.MALFORMED_RESPONSE,
        ),
    ],
)
async def test_a_failing_speech_model_hands_over_to_the_next(
    model_server: FakeModelServer, fault: Scripted, kind: FailureKind
) -> None:
    specs = [model("a", ModelType.TTS), model("b", ModelType.TTS)]
    preferred = ((ModelType.TTS, "a"),)
    h = harness(catalog(model_server, specs, timeout_s=FAST_TIMEOUT_S, preferred=preferred))
    model_server.script("up-a", fault)
    result = await asyncio.wait_for(h.manager.speak("hi", tag=SAY), HANG_GUARD_S)
    assert (result.model, result.audio) == ("b", SILENT_WAV)
    assert outcomes(h.rows) == [("a", kind.value), ("b", "ok")]
    await h.manager.close()


async def test_when_every_speech_model_fails_each_cause_is_reported(
    model_server: FakeModelServer,
) -> None:
    h = harness(catalog(model_server, [model("a", ModelType.TTS)]))
    model_server.script("up-a", Reply(audio=b""))
    with pytest.raises(AllCandidatesFailedError, match="no audio") as caught:
        await h.manager.speak("hi", tag=SAY)
    assert [(f.model, f.kind) for f in caught.value.failures] == [
        ("a", FailureKind.MALFORMED_RESPONSE)
    ]
    await h.manager.close()


# ----- nothing registered ------------------------------------------------------------------


async def test_no_audio_model_is_a_clear_error(model_server: FakeModelServer) -> None:
    h = harness(catalog(model_server, [model("chat"), model("eye", ModelType.VISION)]))
    with pytest.raises(NoModelError, match="no model registered for type asr"):
        await h.manager.transcribe(VOICE_NOTE, "v.wav", tag=HEAR)
    with pytest.raises(NoModelError, match="no model registered for type tts"):
        await h.manager.speak("hi", tag=SAY)
    with pytest.raises(NoModelError, match="'nope'"):
        await h.manager.speak("hi", tag=SAY, model="nope")
    assert not h.manager.has(ModelType.ASR) and not h.manager.has(ModelType.TTS)
    assert model_server.requests == [] and h.rows == []
