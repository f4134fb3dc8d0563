"""The bot's own voice: persona per account, mood, expression fingerprint, chat sessions

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-02 11:50:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import pallas.store.models

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_TIME = pallas.store.models.UtcDateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "bot_persona",
        sa.Column("self_id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("style", sa.Text(), nullable=False),
        sa.Column("updated_at", _TIME, nullable=False),
        sa.PrimaryKeyConstraint("self_id", name=op.f("pk_bot_persona")),
    )
    op.create_table(
        "bot_mood",
        sa.Column("self_id", sa.String(length=64), nullable=False),
        sa.Column("valence", sa.Float(), nullable=False),
        sa.Column("updated_at", _TIME, nullable=False),
        sa.PrimaryKeyConstraint("self_id", name=op.f("pk_bot_mood")),
    )
    op.create_table(
        "bot_voice",
        sa.Column("self_id", sa.String(length=64), nullable=False),
        sa.Column("phrases", sa.JSON(), nullable=False),
        sa.Column("updated_at", _TIME, nullable=False),
        sa.PrimaryKeyConstraint("self_id", name=op.f("pk_bot_voice")),
    )
    op.create_table(
        "chat_session",
        sa.Column("stream_id", _ID, nullable=False),
        sa.Column("started_at", _TIME, nullable=False),
        sa.Column("tone", sa.String(length=64), nullable=False),
        sa.Column("resumption", sa.String(length=200), nullable=False),
        sa.ForeignKeyConstraint(
            ["stream_id"], ["stream.id"], name=op.f("fk_chat_session_stream_id_stream")
        ),
        sa.PrimaryKeyConstraint("stream_id", name=op.f("pk_chat_session")),
    )


def downgrade() -> None:
    op.drop_table("chat_session")
    op.drop_table("bot_voice")
    op.drop_table("bot_mood")
    op.drop_table("bot_persona")
