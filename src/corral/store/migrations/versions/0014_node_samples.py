"""Each node's use over time, machine-wide (the Nodes page's charts).

Revision ID: 0014
Revises: 0013
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "node_samples",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True,
                  autoincrement=True),
        sa.Column("node", sa.String(128), nullable=False),
        sa.Column("time", sa.BigInteger, nullable=False),
        sa.Column("cpu_percent", sa.Float, nullable=False),
        sa.Column("mem_mb", sa.Float, nullable=False),
        sa.Column("gpu_util", sa.Float),
        sa.Column("gpu_mem_mb", sa.Float),
    )
    op.create_index("ix_node_samples_time", "node_samples", ["time"])


def downgrade() -> None:
    op.drop_index("ix_node_samples_time", table_name="node_samples")
    op.drop_table("node_samples")
