"""Outbox rows may carry an idempotency key; the durable job table

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02 03:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import pallas.store.models

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_TIME = pallas.store.models.UtcDateTime(timezone=True)


def upgrade() -> None:
    with op.batch_alter_table("outbox") as batch:
        batch.add_column(sa.Column("idempotency_key", sa.String(length=200), nullable=True))
        batch.create_unique_constraint(op.f("uq_outbox_idempotency_key"), ["idempotency_key"])
    op.create_table(
        "job",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("kind", sa.String(length=64), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("idempotency_key", sa.String(length=200), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("due_at", _TIME, nullable=False),
        sa.Column("lease_holder", sa.String(length=64), nullable=True),
        sa.Column("lease_expires_at", _TIME, nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("max_attempts", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=False),
        sa.Column("created_at", _TIME, nullable=False),
        sa.Column("updated_at", _TIME, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_job")),
        sa.UniqueConstraint("idempotency_key", name=op.f("uq_job_idempotency_key")),
    )
    op.create_index("ix_job_status_due_at", "job", ["status", "due_at"], unique=False)
    op.create_index(
        "ix_job_status_lease_expires_at", "job", ["status", "lease_expires_at"], unique=False
    )


def downgrade() -> None:
    op.drop_index("ix_job_status_lease_expires_at", table_name="job")
    op.drop_index("ix_job_status_due_at", table_name="job")
    op.drop_table("job")
    with op.batch_alter_table("outbox") as batch:
        batch.drop_constraint(op.f("uq_outbox_idempotency_key"), type_="unique")
        batch.drop_column("idempotency_key")
