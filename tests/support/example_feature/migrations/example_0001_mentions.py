"""The example feature's table: a branch of the one history that starts from nothing, so its
revision stands beside the core's in alembic_version (docs/architecture.md)

Revision ID: example_0001
Revises:
Create Date: 2026-12-04 19:40:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import pallas.store.models

revision: str = "example_0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = ("example",)
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "example_mention",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("stream_id", sa.BigInteger(), nullable=False),
        sa.Column("message_id", sa.BigInteger(), nullable=False),
        sa.Column("word", sa.String(length=32), nullable=False),
        sa.Column("counted_at", pallas.store.models.UtcDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_example_mention")),
        sa.UniqueConstraint("message_id", name=op.f("uq_example_mention_message_id")),
    )
    op.create_index(
        op.f("ix_example_mention_stream_id"), "example_mention", ["stream_id"], unique=False
    )


def downgrade() -> None:
    op.drop_table("example_mention")
