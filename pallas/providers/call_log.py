"""The model call log: every model input and output, in its own files, off the event loop.

Model traffic is large and private, so it never goes into the main log (which only gets
`summary_line`). Each process start writes `<dir>/llm-<YYYYmmdd-HHMMSS>[-N].log`; a file
that would grow past `max_bytes` is shifted to `.1.log`, `.2.log`, … (at most `max_pieces`
kept), and only the newest `keep_starts` starts survive, so disk use stays bounded.

`write` only renders the record (cheap: every text part is capped, images and audio are
reduced to their length) and hands it to a daemon thread; the disk is touched only there.
"""

from __future__ import annotations

import contextlib
import io
import os
import queue
import re
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from loguru import logger

from pallas.core.text import excerpt

STAMP_FORMAT = "%Y%m%d-%H%M%S"
# llm-<stamp>[-<clash>][.<piece>].log; anything else in the directory is not ours.
FILE_PATTERN = re.compile(r"llm-(\d{8}-\d{6})(?:-(\d+))?(?:\.(\d+))?\.log")
RECORD_END = "===== end =====\n"
HEADER_CHARS = 300  # one-line header values (names, ids, URLs)
UNKNOWN = "?"

StartKey = tuple[str, int]  # (stamp, clash suffix; 0 when there is none)


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


# ---------------------------------------------------------------------------- rendering


def cut(text: str, limit: int) -> str:
    """`text` bounded to `limit` chars, the marker included, when it is longer."""
    if len(text) <= limit:
        return text
    marker = f"…[cut: {len(text)} chars in total]"
    return text[: max(0, limit - len(marker))] + marker


def _utc(moment: datetime) -> datetime:
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
        f"===== {_utc(record.started_at).isoformat(timespec='milliseconds')} =====",
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


# ------------------------------------------------------------------------------- files


def _start_key(path: Path) -> StartKey | None:
    match = FILE_PATTERN.fullmatch(path.name)
    return None if match is None else (match[1], int(match[2] or 0))


def _our_files(directory: Path) -> dict[StartKey, list[Path]]:
    """Every start found in the directory with all its files (current and pieces)."""
    starts: dict[StartKey, list[Path]] = {}
    for path in directory.iterdir():
        key = _start_key(path)
        if key is not None and path.is_file():
            starts.setdefault(key, []).append(path)
    return starts


def _free_key(stamp: str, taken: Iterable[StartKey]) -> StartKey:
    used = set(taken)
    clash = 0
    while (stamp, clash) in used:
        clash += 1
    return stamp, clash


def _base_name(key: StartKey) -> str:
    stamp, clash = key
    return f"llm-{stamp}" if clash == 0 else f"llm-{stamp}-{clash}"


class _AppendFile:
    """The current file, kept open between batches (writer thread only).

    Checked by name before each batch (one stat): a removed or replaced file is noticed and
    reopened, not written into the void; the directory is recreated if it went away.
    """

    def __init__(self, directory: Path) -> None:
        self.path: Path | None = None
        self._directory = directory
        self._raw: io.FileIO | None = None
        self._identity: tuple[int, int] = (0, 0)  # (device, inode) of the open file

    def size_by_name(self) -> int:
        """The current size of the file at `path`, (re)opening it when it is not ours."""
        assert self.path is not None
        try:
            found = os.stat(self.path)
        except FileNotFoundError:
            found = None
        if found is None or self._raw is None or (found.st_dev, found.st_ino) != self._identity:
            return self._reopen()
        return found.st_size

    def write(self, data: bytes) -> None:
        assert self._raw is not None
        view = memoryview(data)
        while view:  # a raw write may be short
            written = self._raw.write(view)
            if not written:
                raise OSError(f"cannot append to {self.path}")
            view = view[written:]

    def close(self) -> None:
        raw, self._raw = self._raw, None
        if raw is not None:
            with contextlib.suppress(OSError):  # unbuffered: nothing can be lost here
                raw.close()

    def _reopen(self) -> int:
        assert self.path is not None
        self.close()
        self._directory.mkdir(parents=True, exist_ok=True)
        self._raw = io.FileIO(self.path, "a")
        found = os.fstat(self._raw.fileno())
        self._identity = (found.st_dev, found.st_ino)
        return found.st_size


class _Stop:
    """Queue sentinel: the writer thread ends."""


class CallLog:
    """Model calls to rotating files, written by one daemon thread."""

    def __init__(
        self,
        directory: Path,
        *,
        started_at: datetime,
        max_bytes: int = 10 * 1024 * 1024,
        max_pieces: int = 4,
        keep_starts: int = 3,
        max_part_chars: int = 100_000,
        max_record_chars: int = 500_000,
        linger_s: float = 0.05,
    ) -> None:
        self._linger_s = linger_s
        self._directory = Path(directory)
        self._started_at = _utc(started_at)
        self._max_bytes = max_bytes
        self._max_pieces = max_pieces
        self._keep_starts = keep_starts
        self._max_part_chars = max_part_chars
        self._max_record_chars = max_record_chars
        self._path: Path | None = None
        self._file = _AppendFile(self._directory)
        self._queue: queue.SimpleQueue[bytes | threading.Event | _Stop] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()  # makes open/close and enqueueing agree
        self._closed = False
        self._failing = False  # a disk error was reported and has not cleared yet

    @property
    def path(self) -> Path | None:
        return self._path

    def open(self) -> Path:
        """Create the directory, choose this start's file, prune old starts, start writing.

        Never raises for a disk problem: it is reported and writes keep retrying.
        """
        with self._lock:
            if self._path is not None:
                return self._path
            self._path = self._prepare()
            self._file.path = self._path
            if self._closed:  # closed before it was opened: nothing will be written
                return self._path
            self._thread = threading.Thread(
                target=self._run, name="pallas-llm-call-log", daemon=True
            )
            self._thread.start()
            return self._path

    def write(self, record: CallRecord) -> None:
        """Render and queue; dropped silently before `open` and after `close`.

        Rendered here, not on the writer thread: the record is still warm in the cache, and
        the text cannot change when the caller appends to its message list for the next round.
        """
        if self._thread is None or self._closed:
            return
        text = self._render(record)
        if text:
            self._enqueue(text)

    def flush(self, timeout: float = 10.0) -> None:
        """Block until everything written so far is on disk (or `timeout` passes)."""
        done = threading.Event()
        with self._lock:
            if self._thread is None or self._closed:
                return
            self._queue.put(done)
        done.wait(timeout)

    def close(self) -> None:
        """Write what is queued, then stop the thread; later writes are dropped."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            thread = self._thread
            self._queue.put(_Stop())
        if thread is not None:
            thread.join(timeout=10.0)

    def prune_older_than(self, cutoff: datetime) -> int:
        """Delete our files last written before `cutoff`, never the one being written; the
        number deleted. Blocking (file system): call it from a thread (docs/retention.md)."""
        try:
            starts = _our_files(self._directory)
        except OSError:  # no directory yet: nothing to prune
            return 0
        deadline = _utc(cutoff).timestamp()
        deleted = 0
        for path in (p for paths in starts.values() for p in paths):
            try:
                if path != self._path and path.stat().st_mtime < deadline:
                    path.unlink()
                    deleted += 1
            except OSError as exc:
                logger.warning("LLM call log: cannot delete old {}: {!r}", path.name, exc)
        return deleted

    def _enqueue(self, text: bytes) -> None:
        with self._lock:
            if not self._closed:
                self._queue.put(text)

    # -- start-up (the caller's thread, once) --------------------------------------

    def _prepare(self) -> Path:
        stamp = self._started_at.strftime(STAMP_FORMAT)
        try:
            self._directory.mkdir(parents=True, exist_ok=True)
            starts = _our_files(self._directory)
        except OSError as exc:
            self._report(exc)
            return self._directory / f"{_base_name((stamp, 0))}.log"
        key = _free_key(stamp, starts)
        path = self._directory / f"{_base_name(key)}.log"
        self._prune(starts, key)
        try:
            path.touch()  # claims the name at once, so a parallel start picks another
        except OSError as exc:
            self._report(exc)
        return path

    def _prune(self, starts: dict[StartKey, list[Path]], own: StartKey) -> None:
        # Our own start always stays (even if the clock went back); it counts as one.
        others = sorted((key for key in starts if key != own), reverse=True)
        for key in others[max(0, self._keep_starts - 1) :]:
            for path in starts[key]:
                try:
                    path.unlink(missing_ok=True)
                except OSError as exc:
                    logger.warning("LLM call log: cannot delete old {}: {!r}", path.name, exc)

    # -- the writer thread ---------------------------------------------------------

    def _run(self) -> None:
        while True:
            items = [self._queue.get()]
            # A burst of calls becomes one write: fewer syscalls, less GIL traffic with the loop.
            if self._linger_s > 0:  # sleep(0) would only hand the GIL back and forth
                time.sleep(self._linger_s)
            while not self._queue.empty():  # the only consumer: get_nowait cannot fail
                items.append(self._queue.get_nowait())
            if not self._handle(items):
                return

    def _handle(self, items: list[bytes | threading.Event | _Stop]) -> bool:
        """Write the texts in order; settle flush events after what precedes them."""
        texts: list[bytes] = []
        for item in items:
            if isinstance(item, bytes):
                texts.append(item)
                continue
            self._write(texts)
            texts = []
            if isinstance(item, _Stop):
                self._file.close()
                return False
            item.set()
        self._write(texts)
        return True

    def _render(self, record: CallRecord) -> bytes:
        try:
            text = render_record(
                record,
                max_part_chars=self._max_part_chars,
                max_record_chars=self._max_record_chars,
            )
        except Exception as exc:  # a malformed record must not reach the caller
            logger.warning("LLM call log: cannot render a {} call: {!r}", record.model, exc)
            return b""
        return text.encode("utf-8", errors="replace")

    def _write(self, texts: list[bytes]) -> None:
        if not texts:
            return
        try:
            self._append(texts)
        except Exception as exc:  # the thread must outlive any one failure
            self._file.close()  # reopened by name on the next batch
            self._report(exc)
        else:
            self._recovered()

    def _append(self, texts: list[bytes]) -> None:
        size = self._file.size_by_name()
        batch: list[bytes] = []
        for data in texts:
            if size > 0 and size + len(data) > self._max_bytes:
                self._file.write(b"".join(batch))
                batch = []
                self._file.close()
                self._rotate()
                size = self._file.size_by_name()
            batch.append(data)
            size += len(data)
        self._file.write(b"".join(batch))

    def _piece(self, number: int) -> Path:
        assert self._path is not None
        return self._path.with_name(f"{self._path.stem}.{number}.log")

    def _rotate(self) -> None:
        """current -> .1, .1 -> .2, …; the piece beyond `max_pieces` is dropped."""
        assert self._path is not None
        if self._max_pieces <= 0:
            self._path.unlink()
            return
        self._piece(self._max_pieces).unlink(missing_ok=True)
        for number in range(self._max_pieces - 1, 0, -1):
            if self._piece(number).exists():
                self._piece(number).replace(self._piece(number + 1))
        self._path.replace(self._piece(1))

    def _report(self, exc: BaseException) -> None:
        # Once per failure streak: a full disk must not flood the main log.
        if not self._failing:
            self._failing = True
            logger.warning(
                "LLM call log: cannot write to {}: {!r}; will keep trying",
                self._path or self._directory,
                exc,
            )

    def _recovered(self) -> None:
        if self._failing:
            self._failing = False
            logger.info("LLM call log: writing to {} again", self._path)
