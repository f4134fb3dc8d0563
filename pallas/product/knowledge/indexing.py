"""The knowledge folder read into the index, off the reply path (docs/knowledge.md).

  PALLAS_DATA_DIR/knowledge/*            every chat's documents
  PALLAS_DATA_DIR/knowledge/<group>/*    one group's (the folder named by its number)

A scan runs at start and every minute (a periodic job): a file whose time or size changed is
read again (and indexed again when its bytes did), a new one indexed, a gone one forgotten. A
file is read once and hashed from those same bytes, so a file changed while it is read is
indexed as it was read, and again at the next scan. A symlink that leads out of the folder,
a file over the size cap, a second copy of a document already indexed for the same chats
are skipped, said on the console; a file that cannot be read at all is left out, logged.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from loguru import logger

from pallas.product.knowledge.chunking import Chunk, chunk_document
from pallas.product.knowledge.parsing import MAX_FILE_BYTES, Skipped, read_document
from pallas.product.knowledge.store import Doc, DocFile, KnowledgeStore

FOLDER = "knowledge"
TWIN = "和 "  # a twin's reason starts so: looked at again when its original changes
MAX_FILES = 2000
PARSE_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class ScanReport:
    indexed: int = 0
    skipped: int = 0
    dropped: int = 0


def is_group(name: str) -> bool:
    return name.isascii() and name.isdigit()


def scope_of(relative: Path) -> str:
    """A group's folder is named by its number; everything else is every chat's."""
    first = relative.parts[0] if len(relative.parts) > 1 else ""
    return first if is_group(first) else ""


def document_files(root: Path) -> Iterator[Path]:
    """The folder's files, hidden files and folders left out (not even walked), at most
    MAX_FILES, in a stable order."""
    found = 0
    for folder, folders, files in os.walk(root):
        folders[:] = sorted(name for name in folders if not name.startswith("."))
        for name in sorted(files):
            if name.startswith("."):
                continue
            found += 1
            if found > MAX_FILES:
                logger.warning("knowledge: more than {} files; the rest are not read", MAX_FILES)
                return
            yield Path(folder) / name


def _read_at_most(path: Path, limit: int) -> bytes:
    with path.open("rb") as file:
        return file.read(limit)


class FolderIndexer:
    def __init__(self, store: KnowledgeStore, root: Path, clock: Callable[[], datetime],
                 changed: Callable[[], None] = lambda: None) -> None:  # fmt: skip
        self._store = store
        self.root = root
        self._clock = clock
        self._changed = changed  # told after a scan that changed anything
        self._lock = asyncio.Lock()  # one scan at a time
        self._stamps: dict[str, tuple[int, int]] = {}  # (mtime, size) when last read

    async def scan(self) -> ScanReport:
        async with self._lock:
            report = await self._scan()
        if report != ScanReport():
            logger.info("knowledge: {} indexed, {} skipped, {} forgotten", report.indexed,
                        report.skipped, report.dropped)  # fmt: skip
            self._changed()
        return report

    async def _scan(self) -> ScanReport:
        self.root.mkdir(parents=True, exist_ok=True)
        known = {doc.path: doc for doc in await self._store.docs()}
        seen: set[str] = set()
        indexed = skipped = 0
        for path in document_files(self.root):
            relative = path.relative_to(self.root).as_posix()
            seen.add(relative)
            try:
                outcome = await self._read(path, relative, known)
            except Exception as exc:  # one bad file (unreadable, a name too long) ends nothing
                logger.warning("knowledge: {} not read: {!r}", relative, exc)
                continue
            indexed += outcome == "indexed"
            skipped += outcome == "skipped"
        gone = [path for path in known if path not in seen]
        await self._store.drop(gone)
        return ScanReport(indexed, skipped, len(gone))

    async def _read(self, path: Path, relative: str, known: dict[str, Doc]) -> str:
        """One file into the index; what became of it (indexed, skipped, or "" unchanged)."""
        scope = scope_of(Path(relative))
        if not path.resolve().is_relative_to(self.root.resolve()):
            return await self._skip(DocFile(relative, scope, "", 0), "链接指向知识库外面", known)
        stat = path.stat()
        stamp = (stat.st_mtime_ns, stat.st_size)
        old = known.get(relative)
        twin = old is not None and old.reason.startswith(TWIN)  # its original may have changed
        if old is not None and not twin and self._stamps.get(relative) == stamp:
            return ""  # not touched since it was read
        if stat.st_size > MAX_FILE_BYTES:
            too_big = f"文件太大（{stat.st_size // 1024 // 1024} MB，最多 20 MB）"
            file = DocFile(relative, scope, f"size:{stat.st_size}", stat.st_size)
            return await self._skip(file, too_big, known)
        data = await asyncio.to_thread(_read_at_most, path, MAX_FILE_BYTES + 1)
        digest = await asyncio.to_thread(lambda: hashlib.sha256(data).hexdigest())
        file = DocFile(relative, scope, digest, len(data))
        self._stamps[relative] = stamp
        if old is not None and old.sha256 == file.sha256 and not twin:
            return ""
        original = next((d for d in known.values() if d.sha256 == file.sha256
                         and d.scope == scope and d.path != relative
                         and d.status == "indexed"), None)  # fmt: skip
        if original is not None:
            return await self._skip(file, f"{TWIN}{original.path} 内容一样", known)
        try:
            text = await asyncio.wait_for(asyncio.to_thread(read_document, path.suffix, data),
                                          PARSE_TIMEOUT_S)  # fmt: skip
        except TimeoutError:  # a file that hangs its parser is not tried every minute
            text = Skipped(f"读了 {PARSE_TIMEOUT_S:g} 秒还没读完")
        if isinstance(text, Skipped):
            return await self._skip(file, text.reason, known)
        chunks = await asyncio.to_thread(chunk_document, text)
        if not chunks:
            return await self._skip(file, "没有文字", known)
        await self._put(file, chunks, "", known)
        return "indexed"

    async def _skip(self, file: DocFile, reason: str, known: dict[str, Doc]) -> str:
        old = known.get(file.path)
        if old is not None and old.sha256 == file.sha256 and old.reason == reason:
            return ""
        await self._put(file, [], reason, known)
        return "skipped"

    async def _put(self, file: DocFile, chunks: list[Chunk], reason: str,
                   known: dict[str, Doc]) -> None:  # fmt: skip
        """Stored, and known as it now is to the rest of this scan (a twin looks here)."""
        now = self._clock()
        await self._store.put(file, chunks, reason, now)
        status = "skipped" if reason else "indexed"
        known[file.path] = Doc(0, file.path, file.scope, file.sha256, file.size, status, reason,
                               len(chunks), now)  # fmt: skip
