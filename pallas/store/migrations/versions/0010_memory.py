"""Memory: entries, their keyword and vector indexes, the change log, consent, cursors

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02 08:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import pallas.store.models

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_TIME = pallas.store.models.UtcDateTime(timezone=True)


def _fk(table: str, column: str, target: str, **kwargs: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        [column], [f"{target}.id"], name=op.f(f"fk_{table}_{column}_{target}"), **kwargs
    )


def upgrade() -> None:
    op.create_table(
        "memory_entry",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("stream_id", _ID, nullable=False),
        sa.Column("person_id", _ID, nullable=True),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("source", sa.String(length=32), nullable=False),
        sa.Column("source_message_ids", sa.JSON(), nullable=False),
        sa.Column("taught_by", _ID, nullable=True),
        sa.Column("job_id", sa.BigInteger(), nullable=True),
        sa.Column("confidence", sa.Float(), nullable=False),
        sa.Column("reinforced", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("created_at", _TIME, nullable=False),
        sa.Column("updated_at", _TIME, nullable=False),
        sa.Column("last_seen_at", _TIME, nullable=False),
        sa.Column("embedding_model", sa.String(length=128), nullable=False),
        sa.Column("embedding_dim", sa.Integer(), nullable=False),
        _fk("memory_entry", "person_id", "person"),
        _fk("memory_entry", "stream_id", "stream"),
        _fk("memory_entry", "taught_by", "person"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_memory_entry")),
    )
    op.create_index(
        "ix_memory_entry_stream_id_person_id_kind_status",
        "memory_entry",
        ["stream_id", "person_id", "kind", "status"],
    )
    op.create_index("ix_memory_entry_person_id_status", "memory_entry", ["person_id", "status"])
    op.create_index(
        "ix_memory_entry_taught_by_created_at", "memory_entry", ["taught_by", "created_at"]
    )
    op.create_table(
        "memory_term",
        sa.Column("owner", sa.String(length=24), nullable=False),
        sa.Column("term", sa.String(length=32), nullable=False),
        sa.Column("entry_id", _ID, nullable=False),
        _fk("memory_term", "entry_id", "memory_entry", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("owner", "term", "entry_id", name=op.f("pk_memory_term")),
        sqlite_with_rowid=False,
    )
    op.create_index(op.f("ix_memory_term_entry_id"), "memory_term", ["entry_id"])
    op.create_table(
        "memory_vector",
        sa.Column("owner", sa.String(length=24), nullable=False),
        sa.Column("model", sa.String(length=128), nullable=False),
        sa.Column("entry_id", _ID, nullable=False),
        sa.Column("dim", sa.Integer(), nullable=False),
        sa.Column("stream_id", _ID, nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("vector", sa.LargeBinary(), nullable=False),
        _fk("memory_vector", "entry_id", "memory_entry", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("owner", "model", "entry_id", name=op.f("pk_memory_vector")),
    )
    op.create_index(op.f("ix_memory_vector_entry_id"), "memory_vector", ["entry_id"])
    op.create_table(
        "memory_change",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("entry_id", _ID, nullable=False),
        sa.Column("action", sa.String(length=16), nullable=False),
        sa.Column("actor", sa.String(length=64), nullable=False),
        sa.Column("before", sa.JSON(), nullable=True),
        sa.Column("after", sa.JSON(), nullable=True),
        sa.Column("turn_id", sa.BigInteger(), nullable=True),
        sa.Column("at", _TIME, nullable=False),
        _fk("memory_change", "entry_id", "memory_entry"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_memory_change")),
    )
    op.create_index(op.f("ix_memory_change_entry_id"), "memory_change", ["entry_id"])
    op.create_table(
        "memory_consent",
        sa.Column("person_id", _ID, nullable=False),
        sa.Column("granted_at", _TIME, nullable=False),
        sa.Column("message_id", sa.BigInteger(), nullable=True),
        _fk("memory_consent", "person_id", "person"),
        sa.PrimaryKeyConstraint("person_id", name=op.f("pk_memory_consent")),
    )
    op.create_table(
        "memory_cursor",
        sa.Column("stream_id", _ID, nullable=False),
        sa.Column("last_message_id", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", _TIME, nullable=False),
        _fk("memory_cursor", "stream_id", "stream"),
        sa.PrimaryKeyConstraint("stream_id", name=op.f("pk_memory_cursor")),
    )


def downgrade() -> None:
    op.drop_table("memory_cursor")
    op.drop_table("memory_consent")
    op.drop_index(op.f("ix_memory_change_entry_id"), table_name="memory_change")
    op.drop_table("memory_change")
    op.drop_index(op.f("ix_memory_vector_entry_id"), table_name="memory_vector")
    op.drop_table("memory_vector")
    op.drop_index(op.f("ix_memory_term_entry_id"), table_name="memory_term")
    op.drop_table("memory_term")
    op.drop_index("ix_memory_entry_taught_by_created_at", table_name="memory_entry")
    op.drop_index("ix_memory_entry_person_id_status", table_name="memory_entry")
    op.drop_index("ix_memory_entry_stream_id_person_id_kind_status", table_name="memory_entry")
    op.drop_table("memory_entry")
