"""The knowledge folder's tables (core migration 0024, as every built-in feature's)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, ForeignKey, Index, Integer, LargeBinary, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from pallas.store.schema_base import Base, Id, UtcDateTime


class KnowledgeDoc(Base):
    """A file of the knowledge folder, as last read: indexed, or skipped and why."""

    __tablename__ = "knowledge_doc"

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    path: Mapped[str] = mapped_column(String(500), unique=True)  # relative to the folder
    scope: Mapped[str] = mapped_column(String(32))  # "" every chat; else a group's number
    sha256: Mapped[str] = mapped_column(String(64))
    size: Mapped[int] = mapped_column(BigInteger)
    status: Mapped[str] = mapped_column(String(16))  # indexed / skipped
    reason: Mapped[str] = mapped_column(String(200))  # why skipped
    chunks: Mapped[int] = mapped_column(Integer)
    indexed_at: Mapped[datetime] = mapped_column(UtcDateTime())


class KnowledgeChunk(Base):
    """A passage of a document, under its heading path."""

    __tablename__ = "knowledge_chunk"
    __table_args__ = (Index("ix_knowledge_chunk_doc_id", "doc_id"),)

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    doc_id: Mapped[int] = mapped_column(Id, ForeignKey("knowledge_doc.id", ondelete="CASCADE"))
    ord: Mapped[int] = mapped_column(Integer)
    heading: Mapped[str] = mapped_column(String(300))
    text: Mapped[str] = mapped_column(Text)


class KnowledgeTerm(Base):
    """The keyword index: a passage's CJK bigrams and whole Latin words (pallas/core/
    terms.py), with its document's scope, so a search reads only the chats' own."""

    __tablename__ = "knowledge_term"
    __table_args__ = (Index("ix_knowledge_term_term_scope", "term", "scope"),)

    # The key leads with the passage: replacing a document deletes its passages' terms by it.
    chunk_id: Mapped[int] = mapped_column(
        Id, ForeignKey("knowledge_chunk.id", ondelete="CASCADE"), primary_key=True
    )
    term: Mapped[str] = mapped_column(String(32), primary_key=True)
    scope: Mapped[str] = mapped_column(String(32))


class KnowledgeVector(Base):
    """A passage's vector of one embedding model, with its document's scope, so a search
    reads only the chats' own (docs/knowledge.md, "Vectors")."""

    __tablename__ = "knowledge_vector"
    __table_args__ = (Index("ix_knowledge_vector_model_scope", "model", "scope"),)

    chunk_id: Mapped[int] = mapped_column(
        Id, ForeignKey("knowledge_chunk.id", ondelete="CASCADE"), primary_key=True
    )
    model: Mapped[str] = mapped_column(String(128), primary_key=True)
    scope: Mapped[str] = mapped_column(String(32))
    vector: Mapped[bytes] = mapped_column(LargeBinary)  # little-endian float32s
