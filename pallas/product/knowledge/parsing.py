"""Files into text (docs/knowledge.md, "What it reads"): Markdown and plain text (UTF-8, or
GB 18030 when that is what it is), HTML, PDF (its text layer) and DOCX (its headings kept).
Nothing is fetched: a document is read from its bytes alone.

A file that is not what its name says (a binary named `.md`), too large, or with no text
(a scanned PDF) is skipped, with the reason the console shows.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

from docx import Document
from pypdf import PdfReader

from pallas.product.llm.tools.builtin.web import html_to_text

MAX_FILE_BYTES = 20 * 1024 * 1024
TEXT_SUFFIXES = frozenset({".md", ".markdown", ".txt"})
HTML_SUFFIXES = frozenset({".html", ".htm"})
SUFFIXES = TEXT_SUFFIXES | HTML_SUFFIXES | {".pdf", ".docx"}


@dataclass(frozen=True)
class Skipped:
    reason: str  # Chinese, for the owner


def read_document(suffix: str, data: bytes) -> str | Skipped:
    if len(data) > MAX_FILE_BYTES:
        return Skipped(f"文件太大（{len(data) // 1024 // 1024} MB，最多 20 MB）")
    suffix = suffix.lower()
    try:
        if suffix in TEXT_SUFFIXES:
            return decoded(data)
        if suffix in HTML_SUFFIXES:
            text = decoded(data)
            return text if isinstance(text, Skipped) else html_to_text(text)[1]
        if suffix == ".pdf":
            return _pdf(data)
        if suffix == ".docx":
            return _docx(data)
    except Exception as exc:  # a broken file of any kind: skipped, said
        return Skipped(f"读不了这个文件（{type(exc).__name__}）")
    return Skipped("不认识的文件类型（能读 .md .txt .html .pdf .docx）")


def decoded(data: bytes) -> str | Skipped:
    if b"\x00" in data[:8192]:
        return Skipped("看起来不是文本文件")
    for encoding in ("utf-8-sig", "gb18030"):
        try:
            return data.decode(encoding)
        except UnicodeDecodeError:
            continue
    return Skipped("不是 UTF-8 也不是 GBK 编码的文本")


def _pdf(data: bytes) -> str | Skipped:
    reader = PdfReader(io.BytesIO(data))
    pages = [(page.extract_text() or "").strip() for page in reader.pages]
    if not any(pages):
        return Skipped("PDF 里没有文字（可能是扫描件）")
    return "\n\n".join(f"# 第 {n} 页\n\n{text}" for n, text in enumerate(pages, 1) if text)


def _docx(data: bytes) -> str | Skipped:
    lines = []
    for paragraph in Document(io.BytesIO(data)).paragraphs:
        style = (paragraph.style.name if paragraph.style is not None else "") or ""
        level = style.removeprefix("Heading ").strip()
        if style.startswith("Heading ") and level.isdigit():
            lines.append(f"{'#' * min(6, int(level))} {paragraph.text}")
        else:
            lines.append(paragraph.text)
        lines.append("")
    text = "\n".join(lines).strip()
    return text or Skipped("DOCX 里没有文字")
