"""The group's own words and expression samples (docs/slang.md)

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-06 06:40:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import pallas.store.models

revision: str = "0025"
down_revision: str | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TIME = pallas.store.models.UtcDateTime(timezone=True)
_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "slang_term",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("stream_id", _ID, nullable=False),
        sa.Column("term", sa.String(length=32), nullable=False),
        sa.Column("meaning", sa.String(length=200), nullable=True),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("lines", sa.Integer(), nullable=False),
        sa.Column("members", sa.JSON(), nullable=False),
        sa.Column("evidence", sa.JSON(), nullable=False),
        sa.Column("confidence", sa.Float(), nullable=False),
        sa.Column("first_seen", _TIME, nullable=False),
        sa.Column("last_seen", _TIME, nullable=False),
        sa.Column("learned_at", _TIME, nullable=True),
        sa.Column("learned_lines", sa.Integer(), nullable=False),
        sa.Column("learned_from", sa.JSON(), nullable=False),
        sa.Column("taught_by", sa.String(length=64), nullable=False),
        sa.Column("offers", sa.Integer(), nullable=False),
        sa.Column("offered_lines", sa.Integer(), nullable=False),
        sa.Column("last_used_at", _TIME, nullable=True),
        sa.ForeignKeyConstraint(["stream_id"], ["stream.id"], ondelete="CASCADE",
                                name=op.f("fk_slang_term_stream_id_stream")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_slang_term")),
        sa.UniqueConstraint("stream_id", "term", name=op.f("uq_slang_term_stream_id_term")),
    )
    op.create_table(
        "expression_sample",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("stream_id", _ID, nullable=False),
        sa.Column("message_id", _ID, nullable=False),
        sa.Column("text", sa.String(length=100), nullable=False),
        sa.Column("cue", sa.String(length=100), nullable=False),
        sa.Column("weight", sa.Float(), nullable=False),
        sa.Column("kept_at", _TIME, nullable=False),
        sa.ForeignKeyConstraint(["stream_id"], ["stream.id"], ondelete="CASCADE",
                                name=op.f("fk_expression_sample_stream_id_stream")),
        sa.ForeignKeyConstraint(["message_id"], ["message.id"], ondelete="CASCADE",
                                name=op.f("fk_expression_sample_message_id_message")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_expression_sample")),
        sa.UniqueConstraint("stream_id", "message_id",
                            name=op.f("uq_expression_sample_stream_id_message_id")),
    )
    op.create_index("ix_expression_sample_message_id", "expression_sample", ["message_id"])
    op.create_table(
        "slang_cursor",
        sa.Column("stream_id", _ID, nullable=False),
        sa.Column("last_message_id", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["stream_id"], ["stream.id"], ondelete="CASCADE",
                                name=op.f("fk_slang_cursor_stream_id_stream")),
        sa.PrimaryKeyConstraint("stream_id", name=op.f("pk_slang_cursor")),
    )


def downgrade() -> None:
    op.drop_table("slang_cursor")
    op.drop_index("ix_expression_sample_message_id", table_name="expression_sample")
    op.drop_table("expression_sample")
    op.drop_table("slang_term")
