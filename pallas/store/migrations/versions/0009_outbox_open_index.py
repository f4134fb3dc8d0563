"""A partial index over the outbox's open rows, for the dispatcher's heads

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02 05:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_OPEN = sa.text("status IN ('pending', 'sending')")


def upgrade() -> None:
    op.create_index(
        "ix_outbox_open_stream_id_id",
        "outbox",
        ["stream_id", "id"],
        unique=False,
        sqlite_where=_OPEN,
        postgresql_where=_OPEN,
    )


def downgrade() -> None:
    op.drop_index("ix_outbox_open_stream_id_id", table_name="outbox")
