"""The queue read stream by stream: an index over the waiting jobs only, by pool, priority,
project and submission order (a pass reads the first jobs of each stream through it).

Revision ID: 0019
Revises: 0018
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

IN_QUEUE = sa.text("phase IN ('Creating', 'Pending') AND staging IS NULL")


def upgrade() -> None:
    op.create_index("ix_jobs_queue", "jobs", ["pool_id", "priority", "project_id", "seq"],
                    sqlite_where=IN_QUEUE, postgresql_where=IN_QUEUE)


def downgrade() -> None:
    op.drop_index("ix_jobs_queue", table_name="jobs")
