"""Group members (card, role, title) and the group a temporary chat came through

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01 21:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import pallas.store.models

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "member",
        sa.Column("stream_id", _ID, nullable=False),
        sa.Column("person_id", _ID, nullable=False),
        sa.Column("card", sa.String(length=128), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("title", sa.String(length=64), nullable=False),
        sa.Column("updated_at", pallas.store.models.UtcDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["person_id"], ["person.id"], name=op.f("fk_member_person_id_person")
        ),
        sa.ForeignKeyConstraint(
            ["stream_id"], ["stream.id"], name=op.f("fk_member_stream_id_stream")
        ),
        sa.PrimaryKeyConstraint("stream_id", "person_id", name=op.f("pk_member")),
    )
    with op.batch_alter_table("stream") as batch:
        batch.add_column(sa.Column("via_group", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("stream") as batch:
        batch.drop_column("via_group")
    op.drop_table("member")
