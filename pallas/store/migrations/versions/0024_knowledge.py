"""A knowledge folder the bot answers from (docs/knowledge.md)

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-06 04:30:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import pallas.store.models

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TIME = pallas.store.models.UtcDateTime(timezone=True)
_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "knowledge_doc",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("path", sa.String(length=500), nullable=False),
        sa.Column("scope", sa.String(length=32), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.String(length=200), nullable=False),
        sa.Column("chunks", sa.Integer(), nullable=False),
        sa.Column("indexed_at", _TIME, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_knowledge_doc")),
        sa.UniqueConstraint("path", name=op.f("uq_knowledge_doc_path")),
    )
    op.create_table(
        "knowledge_chunk",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("doc_id", _ID, nullable=False),
        sa.Column("ord", sa.Integer(), nullable=False),
        sa.Column("heading", sa.String(length=300), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["doc_id"], ["knowledge_doc.id"], ondelete="CASCADE",
                                name=op.f("fk_knowledge_chunk_doc_id_knowledge_doc")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_knowledge_chunk")),
    )
    op.create_index("ix_knowledge_chunk_doc_id", "knowledge_chunk", ["doc_id"])
    op.create_table(
        "knowledge_term",
        sa.Column("chunk_id", _ID, nullable=False),
        sa.Column("term", sa.String(length=32), nullable=False),
        sa.Column("scope", sa.String(length=32), nullable=False),
        sa.ForeignKeyConstraint(["chunk_id"], ["knowledge_chunk.id"], ondelete="CASCADE",
                                name=op.f("fk_knowledge_term_chunk_id_knowledge_chunk")),
        sa.PrimaryKeyConstraint("chunk_id", "term", name=op.f("pk_knowledge_term")),
    )
    op.create_index("ix_knowledge_term_term_scope", "knowledge_term", ["term", "scope"])
    op.create_table(
        "knowledge_vector",
        sa.Column("chunk_id", _ID, nullable=False),
        sa.Column("model", sa.String(length=128), nullable=False),
        sa.Column("scope", sa.String(length=32), nullable=False),
        sa.Column("vector", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(["chunk_id"], ["knowledge_chunk.id"], ondelete="CASCADE",
                                name=op.f("fk_knowledge_vector_chunk_id_knowledge_chunk")),
        sa.PrimaryKeyConstraint("chunk_id", "model", name=op.f("pk_knowledge_vector")),
    )
    op.create_index("ix_knowledge_vector_model_scope", "knowledge_vector", ["model", "scope"])


def downgrade() -> None:
    op.drop_index("ix_knowledge_vector_model_scope", table_name="knowledge_vector")
    op.drop_table("knowledge_vector")
    op.drop_index("ix_knowledge_term_term_scope", table_name="knowledge_term")
    op.drop_table("knowledge_term")
    op.drop_index("ix_knowledge_chunk_doc_id", table_name="knowledge_chunk")
    op.drop_table("knowledge_chunk")
    op.drop_table("knowledge_doc")
