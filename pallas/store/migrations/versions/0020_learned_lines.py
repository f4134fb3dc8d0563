"""Learned lines: pairs, their answerers, bans and opt-outs (docs/classic.md)

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-05 23:20:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import pallas.store.models

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TIME = pallas.store.models.UtcDateTime(timezone=True)
_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "classic_pair",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("stream_id", sa.BigInteger(), nullable=False),
        sa.Column("context_hash", sa.String(length=32), nullable=False),
        sa.Column("context_text", sa.String(length=120), nullable=False),
        sa.Column("answer_hash", sa.String(length=32), nullable=False),
        sa.Column("answer_text", sa.String(length=200), nullable=False),
        sa.Column("answer_segments", sa.JSON(), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.Column("answerers", sa.Integer(), nullable=False),
        sa.Column("first_seen", _TIME, nullable=False),
        sa.Column("last_seen", _TIME, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_classic_pair")),
        sa.UniqueConstraint(
            "stream_id",
            "context_hash",
            "answer_hash",
            name=op.f("uq_classic_pair_stream_id_context_hash_answer_hash"),
        ),
    )
    op.create_index("ix_classic_pair_context_hash", "classic_pair", ["context_hash"])
    op.create_table(
        "classic_answerer",
        sa.Column("pair_id", sa.BigInteger(), nullable=False),
        sa.Column("person_id", sa.BigInteger(), nullable=False),
        sa.Column("last_at", _TIME, nullable=False),
        sa.PrimaryKeyConstraint("pair_id", "person_id", name=op.f("pk_classic_answerer")),
    )
    op.create_table(
        "classic_ban",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("stream_id", sa.BigInteger(), nullable=True),
        sa.Column("context_hash", sa.String(length=32), nullable=False),
        sa.Column("context_text", sa.String(length=120), nullable=False),
        sa.Column("answer_hash", sa.String(length=32), nullable=False),
        sa.Column("answer_text", sa.String(length=200), nullable=False),
        sa.Column("banned_by", sa.BigInteger(), nullable=False),
        sa.Column("created_at", _TIME, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_classic_ban")),
    )
    op.create_index("ix_classic_ban_context_hash", "classic_ban", ["context_hash"])
    op.create_table(
        "classic_opt_out",
        sa.Column("person_id", sa.BigInteger(), nullable=False),
        sa.Column("created_at", _TIME, nullable=False),
        sa.PrimaryKeyConstraint("person_id", name=op.f("pk_classic_opt_out")),
    )


def downgrade() -> None:
    op.drop_table("classic_opt_out")
    op.drop_index("ix_classic_ban_context_hash", table_name="classic_ban")
    op.drop_table("classic_ban")
    op.drop_table("classic_answerer")
    op.drop_index("ix_classic_pair_context_hash", table_name="classic_pair")
    op.drop_table("classic_pair")
