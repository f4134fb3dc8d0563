"""Media assets: files stored once by content hash, kept by recent use

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02 09:30:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import pallas.store.models

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TIME = pallas.store.models.UtcDateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "asset",
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("path", sa.String(length=200), nullable=False),
        sa.Column("mime", sa.String(length=64), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("width", sa.Integer(), nullable=False),
        sa.Column("height", sa.Integer(), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("created_at", _TIME, nullable=False),
        sa.Column("last_used_at", _TIME, nullable=False),
        sa.PrimaryKeyConstraint("sha256", name=op.f("pk_asset")),
    )
    op.create_index(op.f("ix_asset_last_used_at"), "asset", ["last_used_at"])


def downgrade() -> None:
    op.drop_index(op.f("ix_asset_last_used_at"), table_name="asset")
    op.drop_table("asset")
