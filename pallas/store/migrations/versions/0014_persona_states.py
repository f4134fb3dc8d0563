"""Rage, its silences and the blacklist; favorability; relation notes

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-02 11:40:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import pallas.store.models

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_TIME = pallas.store.models.UtcDateTime(timezone=True)


def _who(table: str) -> list[sa.Column[int] | sa.ForeignKeyConstraint]:
    return [
        sa.Column("stream_id", _ID, nullable=False),
        sa.Column("person_id", _ID, nullable=False),
        sa.ForeignKeyConstraint(
            ["stream_id"], ["stream.id"], name=op.f(f"fk_{table}_stream_id_stream")
        ),
        sa.ForeignKeyConstraint(
            ["person_id"], ["person.id"], name=op.f(f"fk_{table}_person_id_person")
        ),
    ]


def upgrade() -> None:
    op.create_table(
        "rage_state",
        *_who("rage_state"),
        sa.Column("pressure", sa.Float(), nullable=False),
        sa.Column("updated_at", _TIME, nullable=False),
        sa.Column("silenced_until", _TIME, nullable=True),
        sa.Column("forgiven_at", _TIME, nullable=True),
        sa.PrimaryKeyConstraint("stream_id", "person_id", name=op.f("pk_rage_state")),
    )
    op.create_table(
        "rage_silence",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        *_who("rage_silence"),
        sa.Column("started_at", _TIME, nullable=False),
        sa.Column("until", _TIME, nullable=False),
        sa.Column("pressure", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_rage_silence")),
    )
    op.create_index("ix_rage_silence_who", "rage_silence", ["stream_id", "person_id", "started_at"])
    op.create_table(
        "blacklist",
        *_who("blacklist"),
        sa.Column("added_at", _TIME, nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.String(length=200), nullable=False),
        sa.Column("lifted_at", _TIME, nullable=True),
        sa.PrimaryKeyConstraint("stream_id", "person_id", name=op.f("pk_blacklist")),
    )
    op.create_table(
        "favorability",
        sa.Column("self_id", sa.String(length=64), nullable=False),
        sa.Column("person_id", _ID, nullable=False),
        sa.Column("score", sa.Float(), nullable=False),
        sa.Column("updated_at", _TIME, nullable=False),
        sa.Column("warmed_on", sa.String(length=10), nullable=False),
        sa.ForeignKeyConstraint(
            ["person_id"], ["person.id"], name=op.f("fk_favorability_person_id_person")
        ),
        sa.PrimaryKeyConstraint("self_id", "person_id", name=op.f("pk_favorability")),
    )
    op.create_table(
        "relation_note",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("self_id", sa.String(length=64), nullable=False),
        sa.Column("person_id", _ID, nullable=False),
        sa.Column("text", sa.String(length=200), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("created_at", _TIME, nullable=False),
        sa.Column("active", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(
            ["person_id"], ["person.id"], name=op.f("fk_relation_note_person_id_person")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_relation_note")),
    )
    op.create_index("ix_relation_note_who", "relation_note", ["self_id", "person_id"])


def downgrade() -> None:
    op.drop_index("ix_relation_note_who", table_name="relation_note")
    op.drop_table("relation_note")
    op.drop_table("favorability")
    op.drop_table("blacklist")
    op.drop_index("ix_rage_silence_who", table_name="rage_silence")
    op.drop_table("rage_silence")
    op.drop_table("rage_state")
