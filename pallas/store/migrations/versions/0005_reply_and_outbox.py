"""Replies and the durable outbox of outgoing actions

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30 18:37:41.673847
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import pallas.store.models

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "reply",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("turn_id", sa.BigInteger(), nullable=True),
        sa.Column(
            "stream_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("bubbles", sa.JSON(), nullable=False),
        sa.Column("quote", sa.String(length=64), nullable=True),
        sa.Column("created_at", pallas.store.models.UtcDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["stream_id"], ["stream.id"], name=op.f("fk_reply_stream_id_stream")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_reply")),
    )
    with op.batch_alter_table("reply", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_reply_turn_id"), ["turn_id"], unique=False)

    op.create_table(
        "outbox",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("reply_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=True),
        sa.Column("turn_id", sa.BigInteger(), nullable=True),
        sa.Column(
            "stream_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("not_before", pallas.store.models.UtcDateTime(timezone=True), nullable=False),
        sa.Column("created_at", pallas.store.models.UtcDateTime(timezone=True), nullable=False),
        sa.Column("updated_at", pallas.store.models.UtcDateTime(timezone=True), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=False),
        sa.Column("platform_message_id", sa.String(length=64), nullable=True),
        sa.ForeignKeyConstraint(["reply_id"], ["reply.id"], name=op.f("fk_outbox_reply_id_reply")),
        sa.ForeignKeyConstraint(
            ["stream_id"], ["stream.id"], name=op.f("fk_outbox_stream_id_stream")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_outbox")),
    )
    with op.batch_alter_table("outbox", schema=None) as batch_op:
        batch_op.create_index(
            "ix_outbox_status_stream_id_id", ["status", "stream_id", "id"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("outbox", schema=None) as batch_op:
        batch_op.drop_index("ix_outbox_status_stream_id_id")

    op.drop_table("outbox")
    with op.batch_alter_table("reply", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_reply_turn_id"))

    op.drop_table("reply")
