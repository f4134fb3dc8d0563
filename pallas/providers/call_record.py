"""One model call as the call log records it, and its rendering (pure).

Model traffic is large and private, so it never goes into the main log (which only gets
`summary_line`, figures without contents). A record's text bounds every part (`cut`), shows
images and audio as their type and length only, and ends with a line the reader can split on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pallas.core.text import excerpt

RECORD_END = "===== end =====\n"
HEADER_CHARS = 300  # one-line header values (names, ids, URLs)
UNKNOWN = "?"


@dataclass(frozen=True)
class CallRecord:
    started_at: datetime  # aware UTC
    model: str  # registered name, e.g. "deepseek/chat"
    upstream_model: str  # the provider's model id
    model_type: str  # "chat", "embedding", ...
    purpose: str  # "decision", "reply", "embedding", ...
    outcome: str  # "ok" or an error kind such as "timeout", "rate_limited", ...
    duration_ms: float
    input_messages: Sequence[Mapping[str, Any]] = ()  # chat input
    input_texts: Sequence[str] = ()  # embedding input
    tool_names: Sequence[str] = ()
    output_text: str = ""
    output_tool_calls: Sequence[tuple[str, str]] = ()  # (name, raw arguments)
    output_vectors: tuple[int, int] | None = None  # (count, dimension)
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    usage_estimated: bool = False
    cost: float | None = None
    error: str = ""
    stream_key: str = ""  # e.g. "group:123" for context, may be empty
    attempt: int = 1  # which attempt of a failover sequence


def cut(text: str, limit: int) -> str:
    """`text` bounded to `limit` chars, the marker included, when it is longer."""
    if len(text) <= limit:
        return text
    marker = f"…[cut: {len(text)} chars in total]"
    return text[: max(0, limit - len(marker))] + marker


def as_utc(moment: datetime) -> datetime:
    # A naive time is taken as UTC rather than as local time.
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _one_line(value: object) -> str:
    return excerpt(str(value), HEADER_CHARS)


def _count(value: int | None) -> str:
    return UNKNOWN if value is None else str(value)


def _tokens(record: CallRecord) -> str:
    text = (
        f"in={_count(record.prompt_tokens)} out={_count(record.completion_tokens)} "
        f"cache_hit={_count(record.cached_tokens)}"
    )
    return f"{text} (estimated)" if record.usage_estimated else text


def _image(part: Mapping[str, Any]) -> str:
    image = part.get("image_url")
    url = image.get("url", "") if isinstance(image, Mapping) else image
    url = url if isinstance(url, str) else ""
    if url.startswith("data:"):
        return f"[image_url: data URL, {len(url)} chars]"
    if url.startswith(("http://", "https://")):
        return f"[image_url: {cut(' '.join(url.split()), HEADER_CHARS)}]"
    # Anything else may be bare base64: its length only.
    return f"[image_url: {len(url)} chars]"


def _audio(part: Mapping[str, Any]) -> str:
    audio = part.get("input_audio")
    audio = audio if isinstance(audio, Mapping) else {}
    data = audio.get("data")
    size = len(data) if isinstance(data, str) else 0
    kind = excerpt(str(audio.get("format", UNKNOWN)), 20)
    return f"[input_audio {kind}: {size} chars]"


def _part(part: object, max_part_chars: int) -> str:
    if isinstance(part, str):
        return cut(part, max_part_chars)
    if not isinstance(part, Mapping):
        return f"[{type(part).__name__} part: {len(str(part))} chars]"
    kind = part.get("type")
    if kind in ("text", "refusal") and isinstance(part.get(kind), str):
        return cut(part[kind], max_part_chars)
    if kind == "image_url":
        return _image(part)
    if kind == "input_audio":
        return _audio(part)
    # Unknown parts (files, future media) may carry base64: never their contents.
    return f"[{excerpt(str(kind), 40)} part: {len(str(part))} chars]"


def _content(content: object, max_part_chars: int) -> list[str]:
    if content is None:
        return []
    if isinstance(content, str):
        return [cut(content, max_part_chars)]
    if isinstance(content, list | tuple):
        return [_part(part, max_part_chars) for part in content]
    return [f"[{type(content).__name__} content: {len(str(content))} chars]"]


def _message_tool_calls(calls: object, max_part_chars: int) -> list[str]:
    lines = []
    for item in calls if isinstance(calls, list | tuple) else ():
        call = item if isinstance(item, Mapping) else {}
        function = call.get("function")
        function = function if isinstance(function, Mapping) else {}
        name = _one_line(function.get("name", UNKNOWN))
        arguments = cut(str(function.get("arguments", "")), max_part_chars)
        lines.append(f"[tool_call {_one_line(call.get('id', UNKNOWN))}] {name}: {arguments}")
    return lines


def _message(message: object, max_part_chars: int) -> list[str]:
    if not isinstance(message, Mapping):
        # Not the wire shape we know: its size only, as it may carry media.
        return [f"[{type(message).__name__} message: {len(str(message))} chars]"]
    head = _one_line(message.get("role", UNKNOWN))
    if message.get("name"):
        head += f" name={_one_line(message['name'])}"
    if message.get("tool_call_id"):
        head += f" tool_call_id={_one_line(message['tool_call_id'])}"
    return [
        f"[{head}]",
        *_content(message.get("content"), max_part_chars),
        *_message_tool_calls(message.get("tool_calls"), max_part_chars),
    ]


def _input(record: CallRecord, max_part_chars: int) -> list[str]:
    lines = []
    if record.tool_names:
        tools = ", ".join(_one_line(name) for name in record.tool_names)
        lines.append(f"tools: {cut(tools, max_part_chars)}")
    for message in record.input_messages:
        lines += _message(message, max_part_chars)
    for number, text in enumerate(record.input_texts, start=1):
        lines += [f"[text {number}]", cut(text, max_part_chars)]
    return lines or ["(none)"]


def _output(record: CallRecord, max_part_chars: int) -> list[str]:
    lines = [cut(record.output_text, max_part_chars)] if record.output_text else []
    for name, arguments in record.output_tool_calls:
        lines.append(f"[tool_call] {_one_line(name)}: {cut(arguments, max_part_chars)}")
    if record.output_vectors is not None:
        count, dimension = record.output_vectors
        lines.append(f"[vectors: count={count} dimension={dimension}]")
    return lines or ["(none)"]


def _header(record: CallRecord) -> list[str]:
    lines = [
        f"===== {as_utc(record.started_at).isoformat(timespec='milliseconds')} =====",
        f"model: {_one_line(record.model)} (upstream {_one_line(record.upstream_model)})",
        f"type: {_one_line(record.model_type)}",
        f"purpose: {_one_line(record.purpose)}",
        f"outcome: {_one_line(record.outcome)}",
        f"attempt: {record.attempt}",
        f"duration_ms: {record.duration_ms:.0f}",
        f"tokens: {_tokens(record)}",
        f"cost: {UNKNOWN if record.cost is None else f'{record.cost:.6f}'}",
    ]
    if record.stream_key:
        lines.append(f"stream: {_one_line(record.stream_key)}")
    return lines


def render_record(
    record: CallRecord, *, max_part_chars: int = 100_000, max_record_chars: int = 500_000
) -> str:
    """The record's text block; pure, so it is cheap to test and safe to call anywhere."""
    lines = _header(record)
    if record.error:
        lines += ["--- error ---", cut(record.error, max_part_chars)]
    lines += ["--- input ---", *_input(record, max_part_chars)]
    lines += ["--- output ---", *_output(record, max_part_chars)]
    body = "\n".join(lines) + "\n"
    # The end line always survives the cut, so the file stays readable record by record.
    if len(body) + len(RECORD_END) > max_record_chars:
        body = cut(body, max(0, max_record_chars - len(RECORD_END) - 1)) + "\n"
    return body + RECORD_END


def summary_line(record: CallRecord) -> str:
    """The main log's line for one call: figures only, never message contents."""
    text = (
        f"model call {_one_line(record.model)} purpose={_one_line(record.purpose)} "
        f"outcome={_one_line(record.outcome)} attempt={record.attempt} "
        f"{record.duration_ms:.0f}ms tokens {_tokens(record)}"
    )
    if record.cost is not None:
        text += f" cost={record.cost:.6f}"
    if record.stream_key:
        text += f" stream={_one_line(record.stream_key)}"
    return text
