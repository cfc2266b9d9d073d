"""Hyperparameter searches: a training job with `policies.auto_search` runs its trials as
jobs it owns (revision 0007); the search and its trials keep their state here.

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "searches",
        sa.Column("job_id", sa.String(36), sa.ForeignKey("jobs.id", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("project_id", sa.String(64), nullable=False),
        sa.Column("policy", sa.Text, nullable=False),
        sa.Column("model_name", sa.String(64)),
        sa.Column("model_channel", sa.String(64)),
        sa.Column("model_version", sa.Integer),
        sa.Column("best_trial", sa.Integer),
        sa.Column("started_at", sa.BigInteger),
        sa.Column("ended_at", sa.BigInteger),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_searches_live", "searches", ["ended_at"])
    op.create_table(
        "search_trials",
        sa.Column("search_id", sa.String(36),
                  sa.ForeignKey("searches.job_id", ondelete="CASCADE"), primary_key=True),
        sa.Column("number", sa.Integer, primary_key=True),
        sa.Column("job_id", sa.String(36), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("stop_cause", sa.String(16)),
        sa.Column("reason", sa.Text),
        sa.Column("params", sa.Text, nullable=False),
        sa.Column("system_attrs", sa.Text, nullable=False),
        sa.Column("intermediate", sa.Text, nullable=False),
        sa.Column("reward", sa.Float),
        sa.Column("started_at", sa.BigInteger, nullable=False),
        sa.Column("ended_at", sa.BigInteger),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("search_trials")
    op.drop_index("ix_searches_live", table_name="searches")
    op.drop_table("searches")
