"""One group, one conversation, whichever accounts see it (docs/accounts.md)

Existing stores upgrade in place: where several accounts each had a stream for the same
group, the one with the most messages becomes the group's and every row of the others moves
onto it; a row that would clash with one already there (the same member, the same setting)
keeps the group's and is dropped, a message whose id clashes keeps its text under a marked id.

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-06 01:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

import pallas.store.models

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TIME = pallas.store.models.UtcDateTime(timezone=True)
_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_GROUP = sa.text("kind = 'group'")


def upgrade() -> None:
    bind = op.get_bind()
    op.add_column("message", sa.Column("account", sa.String(length=32), nullable=True))
    # Each old row was stored by its chat's one account: the id it has is that account's.
    bind.execute(sa.text(
        "UPDATE message SET account = "
        "(SELECT self_id FROM stream WHERE stream.id = message.stream_id)"
    ))  # fmt: skip
    streams = sa.table(
        "stream", sa.column("platform"), sa.column("external_id"), sa.column("self_id"),
        sa.column("kind"), sa.column("created_at", _TIME),
    )  # fmt: skip
    seen = bind.execute(sa.select(streams).where(streams.c.kind == "group")).all()
    _merge_group_streams(bind)
    op.create_index(
        "uq_stream_group",
        "stream",
        ["platform", "external_id"],
        unique=True,
        sqlite_where=_GROUP,
        postgresql_where=_GROUP,
    )
    op.add_column("message", sa.Column("seq_key", sa.String(length=64), nullable=True))
    op.create_index(
        "uq_message_stream_id_seq_key", "message", ["stream_id", "seq_key"], unique=True
    )
    op.add_column("outbox", sa.Column("account", sa.String(length=32), nullable=True))
    op.create_table(
        "message_copy",
        sa.Column("message_id", _ID, nullable=False),
        sa.Column("self_id", sa.String(length=32), nullable=False),
        sa.Column("platform_message_id", sa.String(length=64), nullable=False),
        sa.ForeignKeyConstraint(
            ["message_id"], ["message.id"], name=op.f("fk_message_copy_message_id_message")
        ),
        sa.PrimaryKeyConstraint("message_id", "self_id", name=op.f("pk_message_copy")),
    )
    op.create_index(
        "ix_message_copy_platform_message_id", "message_copy", ["platform_message_id"]
    )
    op.create_table(
        "stream_account",
        sa.Column("stream_id", _ID, nullable=False),
        sa.Column("self_id", sa.String(length=32), nullable=False),
        sa.Column("first_seen_at", _TIME, nullable=False),
        sa.Column("last_seen_at", _TIME, nullable=False),
        sa.Column("left_at", _TIME, nullable=True),
        sa.ForeignKeyConstraint(
            ["stream_id"], ["stream.id"], name=op.f("fk_stream_account_stream_id_stream")
        ),
        sa.PrimaryKeyConstraint("stream_id", "self_id", name=op.f("pk_stream_account")),
    )
    _seed_group_accounts(bind, seen)


def _seed_group_accounts(bind: sa.Connection, seen: Sequence[Any]) -> None:
    """Every account that had a group before is in it (on the merged row), and one of ours."""
    kept = {
        (row.platform, row.external_id): row.id
        for row in bind.execute(
            sa.text("SELECT id, platform, external_id FROM stream WHERE kind = 'group'")
        )
    }
    rows = {(kept[(r.platform, r.external_id)], r.self_id): r.created_at for r in seen}
    table = sa.table(
        "stream_account",
        sa.column("stream_id"), sa.column("self_id"), sa.column("first_seen_at", _TIME),
        sa.column("last_seen_at", _TIME), sa.column("left_at", _TIME),
    )  # fmt: skip
    if rows:
        bind.execute(table.insert(), [
            {"stream_id": sid, "self_id": account, "first_seen_at": at, "last_seen_at": at,
             "left_at": None}
            for (sid, account), at in rows.items()
        ])  # fmt: skip


def downgrade() -> None:
    op.drop_table("stream_account")
    op.drop_index("ix_message_copy_platform_message_id", table_name="message_copy")
    op.drop_table("message_copy")
    with op.batch_alter_table("outbox") as batch:
        batch.drop_column("account")
    op.drop_index("uq_message_stream_id_seq_key", table_name="message")
    with op.batch_alter_table("message") as batch:
        batch.drop_column("seq_key")
        batch.drop_column("account")
    op.drop_index("uq_stream_group", table_name="stream")


def _merge_group_streams(bind: sa.Connection) -> None:
    doubles = bind.execute(
        sa.text(
            "SELECT platform, external_id FROM stream WHERE kind = 'group' "
            "GROUP BY platform, external_id HAVING COUNT(*) > 1"
        )
    ).all()
    if not doubles:
        return
    holders = _stream_columns(bind)
    for platform, external_id in doubles:
        ids = bind.execute(
            sa.text(
                "SELECT s.id FROM stream s LEFT JOIN message m ON m.stream_id = s.id "
                "WHERE s.kind = 'group' AND s.platform = :p AND s.external_id = :e "
                "GROUP BY s.id ORDER BY COUNT(m.id) DESC, s.id"
            ),
            {"p": platform, "e": external_id},
        ).scalars().all()
        keep, others = ids[0], ids[1:]
        for other in others:
            _move_stream(bind, holders, keep, other)


def _stream_columns(bind: sa.Connection) -> list[tuple[str, str, list[list[str]]]]:
    """Every (table, column) that names a stream by id, with the table's unique keys."""
    inspector = sa.inspect(bind)
    found = []
    for table in inspector.get_table_names():
        if table in ("stream", "alembic_version"):
            continue
        columns = {c["name"] for c in inspector.get_columns(table)}
        named = {
            fk["constrained_columns"][0]
            for fk in inspector.get_foreign_keys(table)
            if fk["referred_table"] == "stream" and len(fk["constrained_columns"]) == 1
        }
        if "stream_id" in columns:
            named.add("stream_id")
        keys = [inspector.get_pk_constraint(table).get("constrained_columns") or []]
        keys += [u["column_names"] for u in inspector.get_unique_constraints(table)]
        keys += [i["column_names"] for i in inspector.get_indexes(table) if i.get("unique")]
        found += [(table, column, [k for k in keys if column in k]) for column in sorted(named)]
    return found


def _move_stream(
    bind: sa.Connection, holders: list[tuple[str, str, list[list[str]]]], keep: int, other: int
) -> None:
    ids = {"keep": keep, "other": other}
    bind.execute(
        sa.text(
            "UPDATE message SET platform_message_id = platform_message_id || '~' || :tag "
            "WHERE stream_id = :other AND platform_message_id IN "
            "(SELECT platform_message_id FROM message WHERE stream_id = :keep)"
        ),
        {**ids, "tag": str(other)},
    )
    for table, column, keys in holders:
        clash = " OR ".join(_clash_sql(table, column, key) for key in keys)
        where = f"{column} = :other" + (f" AND NOT ({clash})" if clash else "")
        bind.execute(sa.text(f"UPDATE {table} SET {column} = :keep WHERE {where}"), ids)
        bind.execute(sa.text(f"DELETE FROM {table} WHERE {column} = :other"), ids)
    owners = {"keep": f"s{keep}", "other": f"s{other}"}  # memory's index rows about the group
    tables = set(sa.inspect(bind).get_table_names())
    for table in ("memory_term", "memory_vector"):
        if table in tables:
            bind.execute(sa.text(f"UPDATE {table} SET owner = :keep WHERE owner = :other"), owners)
    _move_open_jobs(bind, keep, other)
    scope = {"keep": str(keep), "other": str(other)}
    bind.execute(
        sa.text(
            "UPDATE setting SET scope_id = :keep WHERE scope_id = :other AND section NOT IN "
            "(SELECT section FROM setting WHERE scope_id = :keep)"
        ),
        scope,
    )
    bind.execute(sa.text("DELETE FROM setting WHERE scope_id = :other"), scope)
    bind.execute(sa.text("DELETE FROM stream WHERE id = :other"), ids)


def _move_open_jobs(bind: sa.Connection, keep: int, other: int) -> None:
    """Work still queued for the chat (an extraction, a follow-up) runs on the group's row."""
    jobs = sa.table("job", sa.column("id"), sa.column("status"), sa.column("payload", sa.JSON))
    rows = bind.execute(
        sa.select(jobs.c.id, jobs.c.payload).where(jobs.c.status.in_(("pending", "running")))
    ).all()
    for job_id, payload in rows:
        if isinstance(payload, dict) and payload.get("stream_id") == other:
            moved = {**payload, "stream_id": keep}
            bind.execute(jobs.update().where(jobs.c.id == job_id).values(payload=moved))


def _clash_sql(table: str, column: str, key: list[str]) -> str:
    """A row of `other` whose unique key is already taken on `keep`."""
    same = " AND ".join(f"t2.{c} = {table}.{c}" for c in key if c != column)
    match = f" AND {same}" if same else ""
    return f"EXISTS (SELECT 1 FROM {table} AS t2 WHERE t2.{column} = :keep{match})"
