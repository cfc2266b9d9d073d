"""Fault tolerance: each running record's failure class, a job's restart time (its
backoff), why corral is stopping it (a hang, its run time), and the nodes it is kept off.

Jobs stopped on request were stored with the failure class `terminated`; the class is
`stopped` now.

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("attempts", sa.Column("failure_class", sa.String(32)))
    op.add_column("jobs", sa.Column("restart_at", sa.BigInteger))
    op.add_column("jobs", sa.Column("stop_cause", sa.String(16)))
    op.add_column("jobs", sa.Column("excluded_nodes", sa.Text))
    op.execute("UPDATE jobs SET failure_class = 'stopped' WHERE failure_class = 'terminated'")


def downgrade() -> None:
    op.execute("UPDATE jobs SET failure_class = 'terminated' WHERE failure_class = 'stopped'")
    for column in ("excluded_nodes", "stop_cause", "restart_at"):
        op.drop_column("jobs", column)
    op.drop_column("attempts", "failure_class")
