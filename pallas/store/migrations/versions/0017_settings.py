"""Settings sections' stored values (docs/console.md)

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-02 23:50:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import pallas.store.models

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TIME = pallas.store.models.UtcDateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "setting",
        sa.Column("section", sa.String(length=32), nullable=False),
        sa.Column("scope_id", sa.String(length=64), nullable=False),
        sa.Column("values", sa.JSON(), nullable=False),
        sa.Column("updated_at", _TIME, nullable=False),
        sa.PrimaryKeyConstraint("section", "scope_id", name=op.f("pk_setting")),
    )


def downgrade() -> None:
    op.drop_table("setting")
