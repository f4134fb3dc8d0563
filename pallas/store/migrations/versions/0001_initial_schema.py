"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-30 15:18:52.662073
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import pallas.store.models

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "person",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("display_name", sa.String(length=128), nullable=False),
        sa.Column("created_at", pallas.store.models.UtcDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_person")),
    )
    op.create_table(
        "stream",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("platform", sa.String(length=16), nullable=False),
        sa.Column("self_id", sa.String(length=32), nullable=False),
        sa.Column("kind", sa.String(length=8), nullable=False),
        sa.Column("external_id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("created_at", pallas.store.models.UtcDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_stream")),
        sa.UniqueConstraint(
            "platform",
            "self_id",
            "kind",
            "external_id",
            name=op.f("uq_stream_platform_self_id_kind_external_id"),
        ),
    )
    op.create_table(
        "identity",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("platform", sa.String(length=16), nullable=False),
        sa.Column("user_id", sa.String(length=64), nullable=False),
        sa.Column(
            "person_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("nickname", sa.String(length=128), nullable=False),
        sa.Column("created_at", pallas.store.models.UtcDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["person_id"], ["person.id"], name=op.f("fk_identity_person_id_person")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_identity")),
        sa.UniqueConstraint("platform", "user_id", name=op.f("uq_identity_platform_user_id")),
    )
    with op.batch_alter_table("identity", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_identity_person_id"), ["person_id"], unique=False)

    op.create_table(
        "message",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column(
            "stream_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column(
            "sender_person_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("platform_message_id", sa.String(length=64), nullable=False),
        sa.Column("time", pallas.store.models.UtcDateTime(timezone=True), nullable=False),
        sa.Column("stored_at", pallas.store.models.UtcDateTime(timezone=True), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("segments", sa.JSON(), nullable=False),
        sa.Column("reply_to", sa.String(length=64), nullable=True),
        sa.Column("mentions", sa.JSON(), nullable=False),
        sa.Column("mentions_all", sa.Boolean(), nullable=False),
        sa.Column("is_poke", sa.Boolean(), nullable=False),
        sa.Column("from_bot", sa.Boolean(), nullable=False),
        sa.Column("recalled", sa.Boolean(), nullable=False),
        sa.Column("suppressed", sa.Boolean(), nullable=False),
        sa.Column("truncated", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(
            ["sender_person_id"], ["person.id"], name=op.f("fk_message_sender_person_id_person")
        ),
        sa.ForeignKeyConstraint(
            ["stream_id"], ["stream.id"], name=op.f("fk_message_stream_id_stream")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_message")),
        sa.UniqueConstraint(
            "stream_id",
            "platform_message_id",
            name=op.f("uq_message_stream_id_platform_message_id"),
        ),
    )
    with op.batch_alter_table("message", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_message_sender_person_id"), ["sender_person_id"], unique=False
        )
        batch_op.create_index("ix_message_stream_id_id", ["stream_id", "id"], unique=False)

    op.create_table(
        "event",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("turn_id", sa.BigInteger(), nullable=True),
        sa.Column("stream_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=True),
        sa.Column("person_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=True),
        sa.Column(
            "message_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=True
        ),
        sa.Column("reason", sa.String(length=64), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("created_at", pallas.store.models.UtcDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["message_id"], ["message.id"], name=op.f("fk_event_message_id_message")
        ),
        sa.ForeignKeyConstraint(
            ["person_id"], ["person.id"], name=op.f("fk_event_person_id_person")
        ),
        sa.ForeignKeyConstraint(
            ["stream_id"], ["stream.id"], name=op.f("fk_event_stream_id_stream")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_event")),
    )
    with op.batch_alter_table("event", schema=None) as batch_op:
        batch_op.create_index("ix_event_kind_created_at", ["kind", "created_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_event_message_id"), ["message_id"], unique=False)
        batch_op.create_index(
            "ix_event_stream_id_created_at", ["stream_id", "created_at"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_event_turn_id"), ["turn_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("event", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_event_turn_id"))
        batch_op.drop_index("ix_event_stream_id_created_at")
        batch_op.drop_index(batch_op.f("ix_event_message_id"))
        batch_op.drop_index("ix_event_kind_created_at")

    op.drop_table("event")
    with op.batch_alter_table("message", schema=None) as batch_op:
        batch_op.drop_index("ix_message_stream_id_id")
        batch_op.drop_index(batch_op.f("ix_message_sender_person_id"))

    op.drop_table("message")
    with op.batch_alter_table("identity", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_identity_person_id"))

    op.drop_table("identity")
    op.drop_table("stream")
    op.drop_table("person")
