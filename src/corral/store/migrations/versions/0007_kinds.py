"""Jobs owned by the controllers of job kinds, and those controllers' events.

An incremental-learning loop, a pipeline or a notebook runs its work as ordinary training
jobs: a job records which object of which kind owns it and its role there (`round-3/train`,
say). The owner and the role are unique together, so that a controller that submits the
same job again after a crash finds the one it made instead of making another.

`kind_events` is the event log of the controllers' own objects, as `job_events` is of jobs.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

OWNED = sa.text("owner_kind IS NOT NULL")


def upgrade() -> None:
    op.add_column("jobs", sa.Column("owner_kind", sa.String(32)))
    op.add_column("jobs", sa.Column("owner_id", sa.String(36)))
    op.add_column("jobs", sa.Column("owner_role", sa.String(64)))
    op.create_index("ux_jobs_owner", "jobs", ["owner_kind", "owner_id", "owner_role"],
                    unique=True, sqlite_where=OWNED, postgresql_where=OWNED)
    op.create_table(
        "kind_events",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True,
                  autoincrement=True),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("object_id", sa.String(36), nullable=False),
        sa.Column("time", sa.BigInteger, nullable=False),
        sa.Column("level", sa.String(8), nullable=False),
        sa.Column("message", sa.Text, nullable=False),
    )
    op.create_index("ix_kind_events_object", "kind_events", ["kind", "object_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_kind_events_object", table_name="kind_events")
    op.drop_table("kind_events")
    op.drop_index("ux_jobs_owner", table_name="jobs")
    op.drop_column("jobs", "owner_role")
    op.drop_column("jobs", "owner_id")
    op.drop_column("jobs", "owner_kind")
