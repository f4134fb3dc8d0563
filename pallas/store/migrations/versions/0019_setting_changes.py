"""Every settings change kept with what it replaced (docs/cost.md, "The replay")

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-05 22:30:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import pallas.store.models

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TIME = pallas.store.models.UtcDateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "setting_change",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("section", sa.String(length=32), nullable=False),
        sa.Column("scope_id", sa.String(length=64), nullable=False),
        sa.Column("before", sa.JSON(), nullable=False),
        sa.Column("after", sa.JSON(), nullable=False),
        sa.Column("changed_at", _TIME, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_setting_change")),
    )
    op.create_index(
        "ix_setting_change_section_scope_id_changed_at",
        "setting_change",
        ["section", "scope_id", "changed_at"],
    )


def downgrade() -> None:
    op.drop_index("ix_setting_change_section_scope_id_changed_at", table_name="setting_change")
    op.drop_table("setting_change")
