"""Accelerators other than GPUs as named counts: per task on jobs, device ids on tasks,
limits on quotas.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

COLUMNS = (("jobs", "accelerators"), ("tasks", "accel_ids"), ("quotas", "accelerators"))


def upgrade() -> None:
    # Plain ALTERs, no batch copy: on SQLite recreating `jobs` would drop the old table, and
    # with foreign keys on that cascades into every job's attempts, tasks and events.
    for table, column in COLUMNS:
        op.add_column(table, sa.Column(column, sa.Text(), nullable=True))


def downgrade() -> None:
    for table, column in reversed(COLUMNS):
        op.drop_column(table, column)
