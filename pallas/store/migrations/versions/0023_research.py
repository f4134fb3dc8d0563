"""Research in the background (docs/tasks.md)

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-06 03:30:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import pallas.store.models

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TIME = pallas.store.models.UtcDateTime(timezone=True)
_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "research",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("stream_id", sa.BigInteger(), nullable=False),
        sa.Column("person_id", sa.BigInteger(), nullable=False),
        sa.Column("user_id", sa.String(length=64), nullable=False),
        sa.Column("account", sa.String(length=32), nullable=False),
        sa.Column("question", sa.String(length=500), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("outcome", sa.String(length=200), nullable=False),
        sa.Column("created_at", _TIME, nullable=False),
        sa.Column("updated_at", _TIME, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_research")),
    )
    op.create_index("ix_research_person_id_status", "research", ["person_id", "status"])
    op.create_index("ix_research_stream_id_status", "research", ["stream_id", "status"])


def downgrade() -> None:
    op.drop_index("ix_research_stream_id_status", table_name="research")
    op.drop_index("ix_research_person_id_status", table_name="research")
    op.drop_table("research")
