"""merchant: the a2a-sdk task table, one row per A2A task, scoped to its owner (tenant and user)

The table is the one a2a-sdk 1.3's `DatabaseTaskStore` reads and writes (`a2a.server.models.TaskModel`):
same name, columns, types, nullability and indexes, so the SDK runs against it with `create_table=False`.
Task and context ids are capped at 36 characters (UUIDs) by the SDK's model. `owner` holds the merchant's
tenant-and-user key; `last_updated` is the status timestamp as naive UTC, which orders ListTasks.

Revision ID: m0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "m0001"
down_revision = None
branch_labels = ("merchant",)
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tasks",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("context_id", sa.String(36), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("owner", sa.String(255), nullable=True),
        sa.Column("last_updated", sa.DateTime(), nullable=True),
        sa.Column("status", sa.JSON(), nullable=False),
        sa.Column("artifacts", sa.JSON(), nullable=True),
        sa.Column("history", sa.JSON(), nullable=True),
        sa.Column("protocol_version", sa.String(16), nullable=True),
        sa.Column("metadata", sa.JSON(), nullable=True),
    )
    # Both indexes exist in the SDK's model: the composite one serves owner-scoped ListTasks ordered by
    # time; `ix_tasks_id` duplicates the primary key (the model declares `index=True` on it) and is kept
    # so the schema stays identical to what the SDK would create.
    op.create_index("idx_tasks_owner_last_updated", "tasks", ["owner", "last_updated"])
    op.create_index("ix_tasks_id", "tasks", ["id"])


def downgrade() -> None:
    op.drop_table("tasks")
