"""turns, stream policy and state

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30 15:37:38.723181
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import pallas.store.models

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "stream_policy",
        sa.Column(
            "stream_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("overrides", sa.JSON(), nullable=False),
        sa.Column("updated_at", pallas.store.models.UtcDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["stream_id"], ["stream.id"], name=op.f("fk_stream_policy_stream_id_stream")
        ),
        sa.PrimaryKeyConstraint("stream_id", name=op.f("pk_stream_policy")),
    )
    op.create_table(
        "stream_state",
        sa.Column(
            "stream_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("follow_up_declined", sa.Boolean(), nullable=False),
        sa.Column("updated_at", pallas.store.models.UtcDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["stream_id"], ["stream.id"], name=op.f("fk_stream_state_stream_id_stream")
        ),
        sa.PrimaryKeyConstraint("stream_id", name=op.f("pk_stream_state")),
    )
    with op.batch_alter_table("message", schema=None) as batch_op:
        batch_op.add_column(sa.Column("turn_id", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("message", schema=None) as batch_op:
        batch_op.drop_column("turn_id")

    op.drop_table("stream_state")
    op.drop_table("stream_policy")
