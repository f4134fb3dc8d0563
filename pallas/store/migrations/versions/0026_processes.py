"""Several processes on one store: process leases, chat turn leases, owners of rows
(docs/scaling.md)

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-06 09:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import pallas.store.models

revision: str = "0026"
down_revision: str | None = "0025"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TIME = pallas.store.models.UtcDateTime(timezone=True)
_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    # Plain ADD COLUMN (nullable, no default): no table copy on SQLite, however large.
    op.add_column("message", sa.Column("stored_by", sa.String(length=64), nullable=True))
    op.add_column("outbox", sa.Column("holder", sa.String(length=64), nullable=True))
    op.create_table(
        "bot_process",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("run_id", sa.String(length=32), nullable=False),
        sa.Column("started_at", _TIME, nullable=False),
        sa.Column("heartbeat_at", _TIME, nullable=False),
        sa.Column("expires_at", _TIME, nullable=False),
        sa.Column("accounts", sa.JSON(), nullable=False),
        sa.Column("recovered_by", sa.String(length=64), nullable=True),
        sa.Column("recovered_at", _TIME, nullable=True),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_bot_process")),
    )
    op.create_table(
        "chat_turn",
        sa.Column("stream_id", _ID, nullable=False),
        sa.Column("holder", sa.String(length=64), nullable=True),
        sa.Column("taken_at", _TIME, nullable=False),
        sa.ForeignKeyConstraint(["stream_id"], ["stream.id"], ondelete="CASCADE",
                                name=op.f("fk_chat_turn_stream_id_stream")),
        sa.PrimaryKeyConstraint("stream_id", name=op.f("pk_chat_turn")),
    )
    op.create_table(
        "id_block",
        sa.Column("name", sa.String(length=32), nullable=False),
        sa.Column("last", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_id_block")),
    )


def downgrade() -> None:
    op.drop_table("id_block")
    op.drop_table("chat_turn")
    op.drop_table("bot_process")
    with op.batch_alter_table("outbox") as batch:
        batch.drop_column("holder")
    with op.batch_alter_table("message") as batch:
        batch.drop_column("stored_by")
