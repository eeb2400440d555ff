"""merchant: the embedded flow's record of what was accepted under each open AP2 payment mandate (§20.5)

`ap2_mandate_usage` holds one row per open payment mandate, keyed by the hash of its issuer-signed JWT:
the sum of the accepted payment amounts (minor units of the mandate's currency), their number and the time
of the last, which its budget and recurrence constraints are checked against. A reservation locks it.
`ap2_mandate_uses` holds one row per closed payment mandate accepted, keyed by its reference (the hash of
its issuer-signed JWT, the payment receipt's `reference`): the task and round it pays, its amount, and
whether it is reserved, confirmed (the round settled) or released (the round ended with nothing settled);
a round has at most one that is not released.

Revision ID: m0016
Revises: m0015
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "m0016"
down_revision = "m0015"
branch_labels = None
depends_on = None

_LIVE = "state IN ('reserved', 'confirmed')"


def upgrade() -> None:
    op.create_table(
        "ap2_mandate_usage",
        sa.Column("open_mandate", sa.String(43), primary_key=True),
        sa.Column("total", sa.BigInteger, nullable=False),
        sa.Column("uses", sa.Integer, nullable=False),
        sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "ap2_mandate_uses",
        sa.Column("reference", sa.String(43), primary_key=True),
        sa.Column(
            "open_mandate",
            sa.String(43),
            sa.ForeignKey("ap2_mandate_usage.open_mandate", name="fk_ap2_mandate_uses_open_mandate"),
            nullable=False,
        ),
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("task_id", sa.String(64), nullable=False),
        sa.Column("round", sa.Integer, nullable=False),
        sa.Column("checkout_hash", sa.String(43), nullable=False),
        sa.Column("amount", sa.BigInteger, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("reserved_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("ix_ap2_mandate_uses_open_mandate", "ap2_mandate_uses", ["open_mandate"])
    # A round has at most one use that counts (reserved or confirmed).
    op.create_index(
        "uq_ap2_mandate_uses_live_round",
        "ap2_mandate_uses",
        ["task_id", "round"],
        unique=True,
        postgresql_where=sa.text(_LIVE),
        sqlite_where=sa.text(_LIVE),
    )


def downgrade() -> None:
    op.drop_index("uq_ap2_mandate_uses_live_round", table_name="ap2_mandate_uses")
    op.drop_index("ix_ap2_mandate_uses_open_mandate", table_name="ap2_mandate_uses")
    op.drop_table("ap2_mandate_uses")
    op.drop_table("ap2_mandate_usage")
