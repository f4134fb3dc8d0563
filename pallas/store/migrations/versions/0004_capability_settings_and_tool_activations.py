"""Capability settings (tool, plugin and skill switches) and deferred-tool activations

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30 18:24:55.796475
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import pallas.store.models

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "capability_setting",
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=True),
        sa.Column("embedded", sa.Boolean(), nullable=True),
        sa.Column("overrides", sa.JSON(), nullable=False),
        sa.Column("updated_at", pallas.store.models.UtcDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("kind", "name", name=op.f("pk_capability_setting")),
    )
    op.create_table(
        "tool_activation",
        sa.Column(
            "stream_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("expires_at", pallas.store.models.UtcDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["stream_id"], ["stream.id"], name=op.f("fk_tool_activation_stream_id_stream")
        ),
        sa.PrimaryKeyConstraint("stream_id", "name", name=op.f("pk_tool_activation")),
    )


def downgrade() -> None:
    op.drop_table("tool_activation")
    op.drop_table("capability_setting")
