"""Scheduling: pools, priorities, preemption and borrowing on jobs; quotas; usage.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ALTERs, not a batch copy: on SQLite, recreating `jobs` with foreign keys on
    # would cascade-delete every job's attempts, tasks and events.
    for column in (
        sa.Column("pool_id", sa.String(length=64), nullable=False, server_default="default"),
        sa.Column("priority", sa.Integer(), nullable=False, server_default="1"),
        sa.Column("preemptible", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("spread", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("gpu_type", sa.String(length=128), nullable=False, server_default=""),
        sa.Column("borrowed", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("wait_code", sa.String(length=24), nullable=True),
        sa.Column("preempt_requested_at", sa.BigInteger(), nullable=True),
    ):
        op.add_column("jobs", column)
    op.create_table(
        "quotas",
        sa.Column("project_id", sa.String(length=64), nullable=False),
        sa.Column("pool_id", sa.String(length=64), nullable=False),
        sa.Column("cpu", sa.Float(), nullable=True),
        sa.Column("memory_mb", sa.BigInteger(), nullable=True),
        sa.Column("gpu", sa.Integer(), nullable=True),
        sa.Column("borrowing", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("weight", sa.Float(), nullable=False, server_default="1"),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["project_id"], ["projects.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("project_id", "pool_id"),
    )
    op.create_table(
        "project_usage",
        sa.Column("project_id", sa.String(length=64), nullable=False),
        sa.Column("pool_id", sa.String(length=64), nullable=False),
        sa.Column("share", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("project_id", "pool_id"),
    )


def downgrade() -> None:
    op.drop_table("project_usage")
    op.drop_table("quotas")
    for column in ("preempt_requested_at", "wait_code", "borrowed", "gpu_type", "spread",
                   "preemptible", "priority", "pool_id"):
        op.drop_column("jobs", column)
