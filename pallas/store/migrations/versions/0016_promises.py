"""Promises the bot made to owners (docs/persona.md)

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-02 23:30:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import pallas.store.models

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_TIME = pallas.store.models.UtcDateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "promise",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("self_id", sa.String(length=64), nullable=False),
        sa.Column("stream_id", _ID, nullable=False),
        sa.Column("person_id", _ID, nullable=False),
        sa.Column("text", sa.String(length=200), nullable=False),
        sa.Column("made_at", _TIME, nullable=False),
        sa.Column("due_at", _TIME, nullable=True),
        sa.Column("turn_id", sa.BigInteger(), nullable=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("closed_at", _TIME, nullable=True),
        sa.ForeignKeyConstraint(
            ["person_id"], ["person.id"], name=op.f("fk_promise_person_id_person")
        ),
        sa.ForeignKeyConstraint(
            ["stream_id"], ["stream.id"], name=op.f("fk_promise_stream_id_stream")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_promise")),
    )
    op.create_index("ix_promise_stream_state", "promise", ["stream_id", "state"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_promise_stream_state", table_name="promise")
    op.drop_table("promise")
