"""A fake OpenAI-compatible model server: a real HTTP/1.1 server on a loopback socket.

Tests and benchmarks of the model-provider layer point the real `openai` SDK at it. Answers are
scripted per upstream model id (`script`), and every request is recorded (`requests`).

Routes: chat completions, embeddings, audio transcriptions (a multipart upload, answered with
`{"text": <Reply.content>}`) and audio speech (answered with `Reply.audio` as `Reply.mime`).

It is a small hand-written HTTP/1.1 server on `asyncio.start_server` rather than a framework,
because the faults it models (truncated streams, dropped connections, garbage events, stalls)
need exact control over what goes on the wire and when the socket closes.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import itertools
import json
import re
import struct
import time
import wave
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

CHAT_PATH = "/v1/chat/completions"
EMBEDDINGS_PATH = "/v1/embeddings"
TRANSCRIPTIONS_PATH = "/v1/audio/transcriptions"
SPEECH_PATH = "/v1/audio/speech"
ROUTES = (CHAT_PATH, EMBEDDINGS_PATH, TRANSCRIPTIONS_PATH, SPEECH_PATH)
AUDIO_PATHS = (TRANSCRIPTIONS_PATH, SPEECH_PATH)
EMBEDDING_DIMENSIONS = 8

_JSON = "application/json"
_MAX_HEADER_BYTES = 64 * 1024
_BACKLOG = 2048  # asyncio's default of 100 resets connections when hundreds arrive at once
_ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("permission_error", None),
    404: ("invalid_request_error", "not_found"),
    429: ("requests", "rate_limit_exceeded"),
}


def silent_wav(samples: int = 200, rate: int = 8_000) -> bytes:
    """A valid WAV file of 16-bit mono silence (200 samples: 25 ms, 444 bytes)."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(b"\0\0" * samples)
    return buffer.getvalue()


SILENT_WAV = silent_wav()


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 10
    completion_tokens: int = 5
    cached_tokens: int = 0  # reported as usage.prompt_tokens_details.cached_tokens when > 0


@dataclass(frozen=True)
class ToolCallSpec:
    name: str
    arguments: str  # raw JSON text (may be deliberately invalid JSON)
    id: str = ""  # default: "call_<n>", n from a server-wide counter (unique until reset())


@dataclass(frozen=True)
class Reply:
    """A successful completion (a transcription: `content`; speech: `audio` as `mime`)."""

    content: str = "ok"
    tool_calls: tuple[ToolCallSpec, ...] = ()
    usage: Usage = Usage()
    finish_reason: str = ""  # default: "tool_calls" if tool_calls else "stop"
    usage_in_stream: bool = True  # False: ignore stream_options (no usage chunk)
    chunk_chars: int = 3  # streaming: size of content pieces and tool-argument fragments
    delay_s: float = 0.0  # wait before the status line (> client timeout models a stall)
    audio: bytes | None = None  # speech body; None: SILENT_WAV, b"": an empty 200 answer
    mime: str = "audio/wav"  # the speech answer's content type


@dataclass(frozen=True)
class Status:
    """An HTTP error answer with the OpenAI error body."""

    code: int
    message: str = "scripted error"
    retry_after: str | None = None  # sent as the Retry-After header when set


@dataclass(frozen=True)
class BrokenStream:
    """A stream that breaks; a non-stream request gets a truncated JSON body, then a close."""

    chunks_before: int = 2  # valid content chunks sent first (after the role chunk)
    garbage: str = ""  # set: `data: <garbage>` then [DONE]; empty: abrupt close, no [DONE]


@dataclass(frozen=True)
class EmptyChoices:
    """200 with "choices": [] (stream: one chunk with no choices, then [DONE]).

    Embeddings get "data": [], a transcription `{}` (no text), speech an empty body.
    """


@dataclass(frozen=True)
class Stall:
    """Accept the request and never answer, until the client hangs up or the server stops."""


Scripted = Reply | Status | BrokenStream | EmptyChoices | Stall
# Which requests a scripted lane answers, by their JSON body (see FakeModelServer.script_when).
Wants = Callable[[dict[str, Any]], bool]


@dataclass(frozen=True)
class RecordedRequest:
    path: str
    headers: dict[str, str]  # lower-cased names
    # Parsed JSON ({} when the body was not a JSON object). A multipart upload: its text
    # fields, plus "filename", "file_size" and "file_sha256" of its "file" part.
    body: dict[str, Any]
    files: dict[str, bytes] = field(default_factory=dict)  # multipart file parts by field name

    @property
    def api_key(self) -> str:
        scheme, _, token = self.headers.get("authorization", "").partition(" ")
        return token.strip() if scheme.lower() == "bearer" else ""

    @property
    def model(self) -> str:
        model = self.body.get("model", "")
        return model if isinstance(model, str) else ""


def embedding_for(model: str, text: str) -> list[float]:
    """The deterministic vector the server returns for `text` under `model`.

    Values are multiples of 1/128 so they survive the SDK's float32/base64 round trip exactly.
    """
    digest = hashlib.sha256(f"{model}\0{text}".encode()).digest()
    return [(byte - 128) / 128 for byte in digest[:EMBEDDING_DIMENSIONS]]


@dataclass
class _Request:
    method: str
    path: str
    headers: dict[str, str]
    raw_body: bytes
    keep_alive: bool


@dataclass
class _Exchange:
    """One parsed request plus the connection it arrived on."""

    request: _Request
    body: dict[str, Any] | None  # None: malformed JSON
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    created: int = field(default_factory=lambda: int(time.time()))

    @property
    def model(self) -> str:
        model = (self.body or {}).get("model", "")
        return model if isinstance(model, str) else ""

    @property
    def wants_stream(self) -> bool:
        return bool((self.body or {}).get("stream"))

    @property
    def wants_usage_chunk(self) -> bool:
        options = (self.body or {}).get("stream_options")
        return isinstance(options, dict) and bool(options.get("include_usage"))


class _ConnectionDone(Exception):
    """The answer ended the connection (deliberately broken or hung up); stop serving it."""


class FakeModelServer:
    def __init__(self, *, default: Scripted | None = None) -> None:
        self.default: Scripted = default if default is not None else Reply()
        self.requests: list[RecordedRequest] = []
        self._scripts: dict[str, deque[Scripted]] = {}
        self._lanes: dict[str, list[tuple[Wants, deque[Scripted]]]] = {}
        self._server: asyncio.Server | None = None
        self._port = 0
        self._closing = False
        self._handlers: set[asyncio.Task[Any]] = set()
        self._ids = itertools.count(1)
        self._call_ids = itertools.count(1)

    # ----- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        self._closing = False
        self._server = await asyncio.start_server(
            self._serve_connection, "127.0.0.1", 0, limit=_MAX_HEADER_BYTES, backlog=_BACKLOG
        )
        self._port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        self._closing = True
        if self._server is not None:
            self._server.close()
        # Let connections accepted just before close() reach their handler, then end them all:
        # Server.close() alone leaves established (possibly stalled) connections open.
        await asyncio.sleep(0)
        handlers = list(self._handlers)
        for task in handlers:
            task.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> FakeModelServer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    @property
    def port(self) -> int:
        return self._port

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._port}/v1"

    # ----- scripting -----------------------------------------------------------------------

    def script(self, model: str, *answers: Scripted) -> None:
        self._scripts.setdefault(model, deque()).extend(answers)

    def script_when(
        self, model: str, wants: Wants, *answers: Scripted
    ) -> None:
        """Answers for only the requests `wants` picks by their body (a turn's, a background
        job's), in order: a job that calls the same model at its own moment cannot take
        them. Such requests are answered from here before `script`'s queue."""
        self._lanes.setdefault(model, []).append((wants, deque(answers)))

    def requests_for(self, model: str) -> list[RecordedRequest]:
        return [request for request in self.requests if request.model == model]

    def reset(self) -> None:
        self._scripts.clear()
        self._lanes.clear()
        self.requests.clear()
        self._call_ids = itertools.count(1)

    def _next_answer(self, model: str, body: dict[str, Any] | None = None) -> Scripted:
        for wants, lane in self._lanes.get(model, []):
            if lane and body is not None and wants(body):
                return lane.popleft()
        queue = self._scripts.get(model)
        return queue.popleft() if queue else self.default

    # ----- connection loop -----------------------------------------------------------------

    async def _serve_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            while not self._closing:
                request = await _read_request(reader)
                if request is None:
                    break
                await self._dispatch(request, reader, writer)
                if not request.keep_alive:
                    break
        except (_ConnectionDone, ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass  # the client went away or the answer deliberately broke the connection
        except asyncio.CancelledError:
            # stop() cancelled us; end normally, since asyncio 3.11's stream callback logs a
            # spurious error for a cancelled connection task.
            if not self._closing:
                raise
        finally:
            self._handlers.discard(task)
            writer.close()

    async def _dispatch(
        self, request: _Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        body, files = _parse_body(request)
        exchange = _Exchange(request, body, reader, writer)
        self.requests.append(RecordedRequest(request.path, request.headers, body or {}, files))
        if request.method != "POST" or request.path not in ROUTES:
            await _send_error(
                exchange, Status(404, f"no route for {request.method} {request.path}")
            )
        elif body is None:
            await _send_error(exchange, Status(400, "request body is not a JSON object"))
        elif request.path == TRANSCRIPTIONS_PATH and "file" not in files:
            await _send_error(exchange, Status(400, "the upload has no file part"))
        elif request.path in AUDIO_PATHS:
            await _answer_audio(exchange, self._next_answer(exchange.model))
        else:
            await self._answer(exchange, self._next_answer(exchange.model, body))

    async def _answer(self, exchange: _Exchange, answer: Scripted) -> None:
        embeddings = exchange.request.path == EMBEDDINGS_PATH
        match answer:
            case Stall():
                await _stall(exchange)
            case Status():
                await _send_error(exchange, answer)
            case Reply() if embeddings:
                await asyncio.sleep(answer.delay_s)
                await _send_json(exchange, _embeddings_body(exchange))
            case Reply() if exchange.wants_stream:
                await asyncio.sleep(answer.delay_s)
                await _send_events(exchange, self._reply_chunks(exchange, answer))
            case Reply():
                await asyncio.sleep(answer.delay_s)
                await _send_json(exchange, self._completion_body(exchange, answer))
            case EmptyChoices() if embeddings:
                await _send_json(exchange, {**_embeddings_body(exchange), "data": []})
            case EmptyChoices() if exchange.wants_stream:
                await _send_events(exchange, [self._chunk(exchange, "", choices=[])])
            case EmptyChoices():
                await _send_json(exchange, self._completion_body(exchange, Reply(), choices=[]))
            case BrokenStream() if exchange.wants_stream and not embeddings:
                await self._send_broken_stream(exchange, answer)
            case BrokenStream() if embeddings:
                await _send_truncated_json(exchange, _embeddings_body(exchange))
            case BrokenStream():
                await _send_truncated_json(exchange, self._completion_body(exchange, Reply()))

    # ----- chat completion bodies ----------------------------------------------------------

    def _completion_body(
        self, exchange: _Exchange, reply: Reply, *, choices: list[Any] | None = None
    ) -> dict[str, Any]:
        tool_calls = [self._tool_call(spec) for spec in reply.tool_calls]
        message: dict[str, Any] = {
            "role": "assistant",
            "content": None if not reply.content and tool_calls else reply.content,
        }
        if tool_calls:
            message["tool_calls"] = tool_calls
        if choices is None:
            choice = {"index": 0, "message": message, "finish_reason": _finish_reason(reply)}
            choices = [choice]
        return {
            "id": f"chatcmpl-{next(self._ids)}",
            "object": "chat.completion",
            "created": exchange.created,
            "model": exchange.model,
            "choices": choices,
            "usage": _usage_body(reply.usage),
        }

    def _tool_call(self, spec: ToolCallSpec) -> dict[str, Any]:
        return {
            "id": spec.id or f"call_{next(self._call_ids)}",
            "type": "function",
            "function": {"name": spec.name, "arguments": spec.arguments},
        }

    def _chunk(
        self, exchange: _Exchange, chunk_id: str, *, choices: list[Any], **extra: Any
    ) -> dict[str, Any]:
        chunk = {
            "id": chunk_id or f"chatcmpl-{next(self._ids)}",
            "object": "chat.completion.chunk",
            "created": exchange.created,
            "model": exchange.model,
            "choices": choices,
        }
        if exchange.wants_usage_chunk:
            chunk["usage"] = None  # OpenAI marks every chunk this way once usage was requested
        return chunk | extra

    def _reply_chunks(self, exchange: _Exchange, reply: Reply) -> Iterator[dict[str, Any]]:
        chunk_id = f"chatcmpl-{next(self._ids)}"

        def delta(content: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
            choice = {"index": 0, "delta": content, "finish_reason": finish_reason}
            return self._chunk(exchange, chunk_id, choices=[choice])

        yield delta({"role": "assistant", "content": ""})
        for piece in _pieces(reply.content, reply.chunk_chars):
            yield delta({"content": piece})
        for index, spec in enumerate(reply.tool_calls):
            for fragment in self._tool_call_fragments(index, spec, reply.chunk_chars):
                yield delta({"tool_calls": [fragment]})
        yield delta({}, _finish_reason(reply))
        if exchange.wants_usage_chunk and reply.usage_in_stream:
            yield self._chunk(exchange, chunk_id, choices=[], usage=_usage_body(reply.usage))

    def _tool_call_fragments(
        self, index: int, spec: ToolCallSpec, size: int
    ) -> Iterator[dict[str, Any]]:
        # The first fragment names the call; later ones carry only the index and more arguments.
        head = self._tool_call(spec)
        pieces = _pieces(spec.arguments, size) or [""]
        head["function"]["arguments"] = pieces[0]
        yield {"index": index, **head}
        for piece in pieces[1:]:
            yield {"index": index, "function": {"arguments": piece}}

    async def _send_broken_stream(self, exchange: _Exchange, broken: BrokenStream) -> None:
        reply = Reply(content="x" * broken.chunks_before, chunk_chars=1)
        chunks = itertools.islice(self._reply_chunks(exchange, reply), 1 + broken.chunks_before)
        await _start_event_stream(exchange)
        for chunk in chunks:
            await _write_event(exchange.writer, json.dumps(chunk))
        if not broken.garbage:
            raise _ConnectionDone  # close mid-body: no [DONE], no terminating chunk
        await _write_event(exchange.writer, broken.garbage)
        await _write_event(exchange.writer, "[DONE]")
        await _end_chunked(exchange.writer)


# ----- audio ----------------------------------------------------------------------------------


async def _answer_audio(exchange: _Exchange, answer: Scripted) -> None:
    speech = exchange.request.path == SPEECH_PATH
    match answer:
        case Stall():
            await _stall(exchange)
        case Status():
            await _send_error(exchange, answer)
        case Reply() if speech:
            await asyncio.sleep(answer.delay_s)
            audio = SILENT_WAV if answer.audio is None else answer.audio
            await _send_bytes(exchange, audio, answer.mime)
        case Reply():
            await asyncio.sleep(answer.delay_s)
            await _send_json(exchange, {"text": answer.content})
        case EmptyChoices() if speech:
            await _send_bytes(exchange, b"", "audio/wav")
        case EmptyChoices():
            await _send_json(exchange, {})
        case BrokenStream() if speech:
            await _send_truncated(exchange, SILENT_WAV, "audio/wav")
        case BrokenStream():
            await _send_truncated(exchange, json.dumps({"text": "cut off"}).encode(), _JSON)


# ----- HTTP plumbing ---------------------------------------------------------------------------


async def _read_request(reader: asyncio.StreamReader) -> _Request | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if exc.partial.strip():
            raise
        return None  # the client closed an idle keep-alive connection
    request_line, *header_lines = head.decode("latin-1").split("\r\n")
    method, target, version = request_line.split(" ", 2)
    headers: dict[str, str] = {}
    for line in header_lines:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    raw_body = await _read_body(reader, headers)
    connection = headers.get("connection", "").lower()
    keep_alive = connection != "close" if version == "HTTP/1.1" else connection == "keep-alive"
    return _Request(method, target.split("?", 1)[0], headers, raw_body, keep_alive)


async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
    if "chunked" in headers.get("transfer-encoding", "").lower():
        return await _read_chunked_body(reader)
    return await reader.readexactly(int(headers.get("content-length", "0")))


async def _read_chunked_body(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    while size := int((await reader.readuntil(b"\r\n")).split(b";", 1)[0], 16):
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)
    while (await reader.readuntil(b"\r\n")) != b"\r\n":
        pass  # trailer fields are ignored
    return b"".join(parts)


def _response_head(code: int, headers: dict[str, str], keep_alive: bool) -> bytes:
    try:
        phrase = HTTPStatus(code).phrase
    except ValueError:
        phrase = "Unknown"
    lines = [f"HTTP/1.1 {code} {phrase}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    lines.append(f"connection: {'keep-alive' if keep_alive else 'close'}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def _send_json(
    exchange: _Exchange, body: dict[str, Any], code: int = 200, **headers: str
) -> None:
    await _send_bytes(exchange, json.dumps(body).encode(), _JSON, code, **headers)


async def _send_bytes(
    exchange: _Exchange, payload: bytes, content_type: str, code: int = 200, **headers: str
) -> None:
    head_fields = {"content-type": content_type, "content-length": str(len(payload))}
    head = _response_head(code, head_fields | headers, exchange.request.keep_alive)
    exchange.writer.write(head + payload)
    await exchange.writer.drain()


async def _send_truncated_json(exchange: _Exchange, body: dict[str, Any]) -> None:
    await _send_truncated(exchange, json.dumps(body).encode(), _JSON)


async def _send_truncated(exchange: _Exchange, payload: bytes, content_type: str) -> None:
    # Promise the full length, deliver half, then hang up: a connection dropped mid-body.
    head_fields = {"content-type": content_type, "content-length": str(len(payload))}
    exchange.writer.write(_response_head(200, head_fields, keep_alive=False))
    exchange.writer.write(payload[: len(payload) // 2])
    await exchange.writer.drain()
    raise _ConnectionDone


async def _send_error(exchange: _Exchange, status: Status) -> None:
    error_type, error_code = _ERROR_TYPES.get(status.code, ("server_error", None))
    error = {"message": status.message, "type": error_type, "param": None, "code": error_code}
    headers = {"retry-after": status.retry_after} if status.retry_after is not None else {}
    await _send_json(exchange, {"error": error}, status.code, **headers)


async def _start_event_stream(exchange: _Exchange) -> None:
    head_fields = {
        "content-type": "text/event-stream; charset=utf-8",
        "cache-control": "no-cache",
        "transfer-encoding": "chunked",
    }
    exchange.writer.write(_response_head(200, head_fields, exchange.request.keep_alive))


async def _send_events(exchange: _Exchange, chunks: Iterable[dict[str, Any]]) -> None:
    await _start_event_stream(exchange)
    for chunk in chunks:
        await _write_event(exchange.writer, json.dumps(chunk))
    await _write_event(exchange.writer, "[DONE]")
    await _end_chunked(exchange.writer)


async def _write_event(writer: asyncio.StreamWriter, data: str) -> None:
    # One SSE event per HTTP chunk, flushed, so the client sees them arrive one by one.
    event = f"data: {data}\n\n".encode()
    writer.write(b"%x\r\n%s\r\n" % (len(event), event))
    await writer.drain()


async def _end_chunked(writer: asyncio.StreamWriter) -> None:
    writer.write(b"0\r\n\r\n")
    await writer.drain()


async def _stall(exchange: _Exchange) -> None:
    # Hold the request open until the client hangs up (read hits EOF) or stop() cancels us.
    while await exchange.reader.read(65536):
        pass
    raise _ConnectionDone


# ----- bodies ----------------------------------------------------------------------------------


def _parse_body(request: _Request) -> tuple[dict[str, Any] | None, dict[str, bytes]]:
    """(fields, file parts): a JSON object, or a multipart form's fields and files."""
    content_type = request.headers.get("content-type", "")
    if not content_type.lower().startswith("multipart/form-data"):
        return _parse_json_object(request.raw_body), {}
    form = _parse_multipart(content_type, request.raw_body)
    if form is None:
        return None, {}
    fields, files = form
    if "file" in files:
        filename, data = files["file"]
        fields |= {
            "filename": filename,
            "file_size": len(data),
            "file_sha256": hashlib.sha256(data).hexdigest(),
        }
    return fields, {name: data for name, (_, data) in files.items()}


_PARAM = re.compile(r';\s*([\w-]+)=(?:"([^"]*)"|([^;\s]*))')


def _header_params(value: str) -> dict[str, str]:
    return {match[1].lower(): match[2] or match[3] for match in _PARAM.finditer(value)}


def _parse_multipart(
    content_type: str, raw: bytes
) -> tuple[dict[str, Any], dict[str, tuple[str, bytes]]] | None:
    """Text fields and (filename, bytes) file parts; None when it is not a well-formed form."""
    boundary = _header_params(content_type).get("boundary")
    if not boundary:
        return None
    fields: dict[str, Any] = {}
    files: dict[str, tuple[str, bytes]] = {}
    # Each part sits between "--boundary" lines; the last delimiter is "--boundary--".
    for chunk in raw.split(b"--" + boundary.encode("latin-1"))[1:]:
        if chunk.startswith(b"--"):
            return fields, files
        head, separator, content = chunk.removeprefix(b"\r\n").partition(b"\r\n\r\n")
        if not separator:
            return None
        content = content.removesuffix(b"\r\n")
        disposition = next(
            (
                line.split(":", 1)[1]
                for line in head.decode("utf-8", errors="replace").split("\r\n")
                if line.lower().startswith("content-disposition:")
            ),
            "",
        )
        params = _header_params(disposition)
        name = params.get("name", "")
        if "filename" in params:
            files[name] = (params["filename"], content)
        else:
            fields[name] = content.decode("utf-8", errors="replace")
    return None  # no closing delimiter: the body was cut short


def _parse_json_object(raw: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(raw) if raw else None
    except (ValueError, UnicodeDecodeError):
        return None
    return value if isinstance(value, dict) else None


def _pieces(text: str, size: int) -> list[str]:
    if size <= 0:
        return [text] if text else []
    return [text[start : start + size] for start in range(0, len(text), size)]


def _finish_reason(reply: Reply) -> str:
    return reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")


def _usage_body(usage: Usage) -> dict[str, Any]:
    body: dict[str, Any] = {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
    }
    if usage.cached_tokens > 0:
        body["prompt_tokens_details"] = {"cached_tokens": usage.cached_tokens}
    return body


def _embeddings_body(exchange: _Exchange) -> dict[str, Any]:
    body = exchange.body or {}
    raw_input = body.get("input", "")
    items = raw_input if isinstance(raw_input, list) else [raw_input]
    texts = [item if isinstance(item, str) else json.dumps(item) for item in items]
    as_base64 = body.get("encoding_format") == "base64"  # the SDK asks for this by default
    data = [
        {
            "object": "embedding",
            "index": index,
            "embedding": _encode_vector(embedding_for(exchange.model, text), as_base64),
        }
        for index, text in enumerate(texts)
    ]
    tokens = sum(len(text) // 4 + 1 for text in texts)
    usage = {"prompt_tokens": tokens, "total_tokens": tokens}
    return {"object": "list", "data": data, "model": exchange.model, "usage": usage}


def _encode_vector(vector: list[float], as_base64: bool) -> list[float] | str:
    if not as_base64:
        return vector
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")
