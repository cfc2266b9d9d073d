"""Pipelines: DAGs of training jobs (kinds/pipelines).

A pipeline is kept with its attempts (its first run and each rerun) and the run of each of
its tasks in each attempt: the state, the training job it submitted, what it was given
(parameters, inputs) and what it made (outputs, final metrics), so that a rerun finds the
outputs of the runs it reuses and a cached task those of an earlier identical run.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

LIVE = sa.text("deleted_at IS NULL")
CACHEABLE = sa.text("cache_key IS NOT NULL")


def upgrade() -> None:
    op.create_table(
        "pipelines",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("project_id", sa.String(64), sa.ForeignKey("projects.id"), nullable=False),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("description", sa.String(256), nullable=False),
        sa.Column("user_name", sa.String(128), nullable=False),
        sa.Column("spec", sa.Text, nullable=False),
        sa.Column("output_base", sa.Text, nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("model_name", sa.String(64)),
        sa.Column("model_version", sa.Integer),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
        sa.Column("deleted_at", sa.BigInteger),
    )
    op.create_index("ux_pipelines_project_name_live", "pipelines", ["project_id", "name"],
                    unique=True, sqlite_where=LIVE, postgresql_where=LIVE)
    op.create_index("ix_pipelines_project_created", "pipelines", ["project_id", "created_at"])
    op.create_table(
        "pipeline_attempts",
        sa.Column("pipeline_id", sa.String(36),
                  sa.ForeignKey("pipelines.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("number", sa.Integer, primary_key=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("mode", sa.String(16), nullable=False),
        sa.Column("from_task", sa.String(32)),
        sa.Column("parameters", sa.Text, nullable=False),
        sa.Column("overrides", sa.Text, nullable=False),
        sa.Column("progress", sa.Integer, nullable=False),
        sa.Column("message", sa.Text),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("started_at", sa.BigInteger),
        sa.Column("ended_at", sa.BigInteger),
        sa.Column("stop_requested_at", sa.BigInteger),
        sa.Column("timed_out_at", sa.BigInteger),
    )
    op.create_index("ix_pipeline_attempts_state", "pipeline_attempts", ["state"])
    op.create_table(
        "pipeline_runs",
        sa.Column("pipeline_id", sa.String(36),
                  sa.ForeignKey("pipelines.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("attempt", sa.Integer, primary_key=True),
        sa.Column("key", sa.String(48), primary_key=True),
        sa.Column("project_id", sa.String(64), nullable=False),
        sa.Column("task", sa.String(32), nullable=False),
        sa.Column("item", sa.Integer),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("origin", sa.String(8), nullable=False),
        sa.Column("job_id", sa.String(36)),
        sa.Column("source", sa.String(128)),
        sa.Column("cache_key", sa.String(80)),
        sa.Column("parameters", sa.Text),
        sa.Column("inputs", sa.Text),
        sa.Column("outputs", sa.Text),
        sa.Column("metrics", sa.Text),
        sa.Column("message", sa.Text),
        sa.Column("submitted_at", sa.BigInteger),
        sa.Column("ended_at", sa.BigInteger),
        sa.Column("outputs_removed_at", sa.BigInteger),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_pipeline_runs_cache", "pipeline_runs", ["project_id", "cache_key"],
                    sqlite_where=CACHEABLE, postgresql_where=CACHEABLE)


def downgrade() -> None:
    op.drop_index("ix_pipeline_runs_cache", table_name="pipeline_runs")
    op.drop_table("pipeline_runs")
    op.drop_index("ix_pipeline_attempts_state", table_name="pipeline_attempts")
    op.drop_table("pipeline_attempts")
    op.drop_index("ix_pipelines_project_created", table_name="pipelines")
    op.drop_index("ux_pipelines_project_name_live", table_name="pipelines")
    op.drop_table("pipelines")
