"""Sticker habit counts, scan cursors, and the timeline's (time, id) index for scans

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-02 09:40:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import pallas.store.models

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_TIME = pallas.store.models.UtcDateTime(timezone=True)


def upgrade() -> None:
    op.create_index("ix_message_time_id", "message", ["time", "id"])
    op.create_table(
        "sticker_use",
        sa.Column("stream_id", _ID, nullable=False),
        sa.Column("person_id", _ID, nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.Column("first_seen_at", _TIME, nullable=False),
        sa.Column("last_seen_at", _TIME, nullable=False),
        sa.ForeignKeyConstraint(
            ["person_id"], ["person.id"], name=op.f("fk_sticker_use_person_id_person")
        ),
        sa.ForeignKeyConstraint(
            ["stream_id"], ["stream.id"], name=op.f("fk_sticker_use_stream_id_stream")
        ),
        sa.PrimaryKeyConstraint("stream_id", "person_id", "sha256", name=op.f("pk_sticker_use")),
    )
    op.create_table(
        "scan_cursor",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("after_time", _TIME, nullable=False),
        sa.Column("after_message_id", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", _TIME, nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_scan_cursor")),
    )


def downgrade() -> None:
    op.drop_table("scan_cursor")
    op.drop_table("sticker_use")
    op.drop_index("ix_message_time_id", table_name="message")
