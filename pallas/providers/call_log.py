"""The model call log: every model input and output in files of their own, on loguru.

Each process start writes `<dir>/llm-<YYYYmmdd-HHMMSS>[-N].log` (UTC; `-N` when another start
took the name). A loguru file sink rotates it by size and by day (a rotated piece is named
by loguru, `llm-<stamp>.<its creation time>.log`), keeps at most `max_pieces` pieces, and
reopens the file when something removed or replaced it. At start-up only the newest
`keep_starts` starts are kept; `prune_older_than` drops files by age (docs/retention.md).

The sink lives on a loguru logger of its own, so no other sink (NoneBot's console, the main
log file) can ever see a prompt. `write` renders the record on the caller (cheap: every part
is capped, media reduced to their length) and one daemon thread hands it to the sink: the
disk is touched only there. A disk error is reported once per streak in the main log, with
no record in it; loguru's own error report would print the record, so the sink raises to us.
"""

from __future__ import annotations

import queue
import re
import threading
from collections.abc import Callable
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TextIO

from loguru import logger
from loguru._logger import Core, Logger

from pallas.providers.call_record import CallRecord, as_utc, render_record

STAMP_FORMAT = "%Y%m%d-%H%M%S"
# llm-<stamp>[-<clash>][.<piece>].log: a piece is loguru's `<date>_<time>_<µs>` (or a
# number, from before the call log was on loguru). Anything else is not ours.
FILE_PATTERN = re.compile(r"llm-(\d{8}-\d{6})(?:-(\d+))?(?:\.[\d_.-]+)?\.log")

StartKey = tuple[str, int]  # (stamp, clash suffix; 0 when there is none)


def own_logger() -> Logger:
    """A loguru logger with no sink but the ones added to it, made the way loguru makes its
    global one (its documented deepcopy recipe fails once NoneBot added its console sink)."""
    return Logger(core=Core(), exception=None, depth=0, record=False, lazy=False, colors=False,
                  raw=False, capture=True, patchers=[], extra={})  # fmt: skip


def utc_today() -> date:
    return datetime.now(UTC).date()


class SizeOrDay:
    """loguru's rotation rule: rotate before a message that would take the file past
    `max_bytes`, and at the first message of a new UTC day."""

    def __init__(self, max_bytes: int, today: Callable[[], date] = utc_today) -> None:
        self._max_bytes = max_bytes
        self._today = today
        self._day: date | None = None

    def __call__(self, message: str, file: TextIO) -> bool:
        today = self._today()
        new_day, self._day = self._day is not None and today != self._day, today
        size = file.seek(0, 2)
        grown = size + len(message.encode("utf-8", "replace"))
        return size > 0 and (new_day or grown > self._max_bytes)


def _cause(exc: BaseException) -> str:
    if isinstance(exc, OSError):
        return f"{type(exc).__name__} ({exc.strerror or exc.errno})"
    return type(exc).__name__


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


def _free_key(stamp: str, taken: dict[StartKey, list[Path]]) -> StartKey:
    clash = 0
    while (stamp, clash) in taken:
        clash += 1
    return stamp, clash


def _base_name(key: StartKey) -> str:
    stamp, clash = key
    return f"llm-{stamp}" if clash == 0 else f"llm-{stamp}-{clash}"


class CallLog:
    """Model calls to rotating files, written by one daemon thread through loguru."""

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
    ) -> None:
        self._directory = Path(directory)
        self._started_at = as_utc(started_at)
        self._sink = {"rotation": SizeOrDay(max_bytes), "retention": max_pieces}
        self._keep_starts = keep_starts
        self._limits = {"max_part_chars": max_part_chars, "max_record_chars": max_record_chars}
        self._path: Path | None = None
        self._logger = own_logger()
        self._queue: queue.SimpleQueue[str | threading.Event | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()  # makes open/close and enqueueing agree
        self._closed = False
        self._failing = False  # a disk error was reported and has not cleared yet

    @property
    def path(self) -> Path | None:
        return self._path

    def open(self) -> Path:
        """Choose this start's file, prune old starts, start writing. Never raises for a
        disk problem: it is reported and writes keep retrying."""
        with self._lock:
            if self._path is not None:
                return self._path
            self._path = self._prepare()
            if not self._closed:  # closed before it was opened: nothing will be written
                self._thread = threading.Thread(
                    target=self._run, name="pallas-llm-call-log", daemon=True
                )
                self._thread.start()
            return self._path

    def write(self, record: CallRecord) -> None:
        """Render and queue; dropped silently before `open` and after `close`. Rendered
        here: the caller may append to its message list for the next round."""
        if self._thread is None or self._closed:
            return
        try:
            text = render_record(record, **self._limits)
        except Exception as exc:  # a malformed record must not reach the caller
            logger.warning("LLM call log: cannot render a {} call: {!r}", record.model, exc)
            return
        with self._lock:
            if not self._closed:
                self._queue.put(text)

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
            self._queue.put(None)
        if thread is not None:
            thread.join(timeout=10.0)

    def prune_older_than(self, cutoff: datetime) -> int:
        """Delete our files last written before `cutoff`, never the one being written; the
        number deleted. Blocking (file system): call it from a thread (docs/retention.md)."""
        try:
            starts = _our_files(self._directory)
        except OSError:  # no directory yet: nothing to prune
            return 0
        deadline, deleted = as_utc(cutoff).timestamp(), 0
        # This start's pieces are the sink's to keep or drop (it counts them as it rotates).
        own = _start_key(self._path) if self._path is not None else None
        for path in (p for key, paths in starts.items() if key != own for p in paths):
            try:
                if path.stat().st_mtime < deadline:
                    path.unlink()
                    deleted += 1
            except OSError as exc:
                logger.warning("LLM call log: cannot delete old {}: {!r}", path.name, exc)
        return deleted

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
        sink: int | None = None
        while True:
            item = self._queue.get()
            if isinstance(item, threading.Event):
                item.set()  # everything before it went through the line-buffered sink
                continue
            if item is None:
                break
            sink = self._write(item, sink)
        if sink is not None:
            try:
                self._logger.remove(sink)  # flushes and closes the file
            except Exception as exc:  # the file's folder went away: nothing left to close
                self._report(exc)

    def _write(self, text: str, sink: int | None) -> int | None:
        """Write through the sink, adding it first if it is not there (a failed start)."""
        try:
            if sink is None:
                sink = self._add_sink()
            self._logger.opt(raw=True).info(text)
        except Exception as exc:  # the thread must outlive any one failure
            self._report(exc)
            return sink
        self._recovered()
        return sink

    def _add_sink(self) -> int:
        assert self._path is not None
        # A lone surrogate (a broken emoji escape a model or a member sent) is written escaped:
        # it must neither lose the record nor put its text in an error.
        return self._logger.add(
            self._path, format="{message}", watch=True, catch=False, encoding="utf-8",
            errors="backslashreplace", **self._sink,  # type: ignore[arg-type]
        )  # fmt: skip

    def _report(self, exc: BaseException) -> None:
        # Once per failure streak: a full disk must not flood the main log. The kind and the
        # OS's words only: some errors (an encoding error) carry the record's text.
        if not self._failing:
            self._failing = True
            logger.warning(
                "LLM call log: cannot write to {}: {}; will keep trying",
                self._path or self._directory,
                _cause(exc),
            )

    def _recovered(self) -> None:
        if self._failing:
            self._failing = False
            logger.info("LLM call log: writing to {} again", self._path)
