"""Asset descriptions and the labelling budget's clock, promoted sticker habits, the sticker
library

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02 11:10:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import pallas.store.models

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TIME = pallas.store.models.UtcDateTime(timezone=True)


def upgrade() -> None:
    with op.batch_alter_table("asset") as batch:
        batch.add_column(sa.Column("description", sa.Text(), nullable=False, server_default=""))
        batch.add_column(
            sa.Column("emotions", sa.String(length=200), nullable=False, server_default="")
        )
        batch.add_column(sa.Column("labelled_at", _TIME, nullable=True))
        batch.create_index("ix_asset_labelled_at", ["labelled_at"])
    with op.batch_alter_table("sticker_use") as batch:
        batch.add_column(sa.Column("promoted_at", _TIME, nullable=True))
    op.create_table(
        "sticker",
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("caption", sa.String(length=80), nullable=False),
        sa.Column("emotions", sa.String(length=200), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("added_at", _TIME, nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("uses", sa.Integer(), nullable=False),
        sa.Column("last_sent_at", _TIME, nullable=True),
        sa.ForeignKeyConstraint(["sha256"], ["asset.sha256"], name=op.f("fk_sticker_sha256_asset")),
        sa.PrimaryKeyConstraint("sha256", name=op.f("pk_sticker")),
    )


def downgrade() -> None:
    op.drop_table("sticker")
    with op.batch_alter_table("sticker_use") as batch:
        batch.drop_column("promoted_at")
    with op.batch_alter_table("asset") as batch:
        batch.drop_index("ix_asset_labelled_at")
        batch.drop_column("labelled_at")
        batch.drop_column("emotions")
        batch.drop_column("description")
