"""Reminders for everyone (docs/tasks.md)

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-06 02:20:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import pallas.store.models

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TIME = pallas.store.models.UtcDateTime(timezone=True)
_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "reminder",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("stream_id", sa.BigInteger(), nullable=False),
        sa.Column("person_id", sa.BigInteger(), nullable=False),
        sa.Column("user_id", sa.String(length=64), nullable=False),
        sa.Column("account", sa.String(length=32), nullable=False),
        sa.Column("text", sa.String(length=500), nullable=False),
        sa.Column("due_at", _TIME, nullable=False),
        sa.Column("rhythm", sa.JSON(), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("created_at", _TIME, nullable=False),
        sa.Column("updated_at", _TIME, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_reminder")),
    )
    op.create_index("ix_reminder_person_id_status", "reminder", ["person_id", "status"])
    op.create_index("ix_reminder_stream_id_status", "reminder", ["stream_id", "status"])


def downgrade() -> None:
    op.drop_index("ix_reminder_stream_id_status", table_name="reminder")
    op.drop_index("ix_reminder_person_id_status", table_name="reminder")
    op.drop_table("reminder")
