"""Outbox rows and the bot's recorded messages know which part of the bot sent them

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-05 17:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Rows from before were all the agent's or counted as such: the gate saw them that way.
    with op.batch_alter_table("outbox") as batch:
        batch.add_column(
            sa.Column("origin", sa.String(16), nullable=False, server_default="agent_reply")
        )
    with op.batch_alter_table("message") as batch:
        batch.add_column(sa.Column("origin", sa.String(16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("message") as batch:
        batch.drop_column("origin")
    with op.batch_alter_table("outbox") as batch:
        batch.drop_column("origin")
