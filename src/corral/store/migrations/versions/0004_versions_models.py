"""Job versions, training metrics reported by jobs, the model registry, object storage.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_OLD_UNIQUE = sa.text("deleted_at IS NULL")
_NEW_UNIQUE = sa.text("deleted_at IS NULL AND (version IS NULL OR version = 1)")
_ENDED = ("Completed", "Failed", "Terminated", "Abnormal")
_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    # Plain ALTERs, no batch copy: on SQLite recreating `jobs` would drop the old table, and
    # with foreign keys on that cascades into every job's attempts, tasks and events.
    op.add_column("jobs", sa.Column("family_id", sa.String(length=36), nullable=True))
    op.add_column("jobs", sa.Column("version", sa.Integer(), nullable=True))
    op.add_column("jobs", sa.Column("staging", sa.String(length=16), nullable=True))
    op.add_column("jobs", sa.Column("finalized_at", sa.BigInteger(), nullable=True))
    op.drop_index("ux_jobs_project_name_live", table_name="jobs")
    op.create_index("ux_jobs_project_name_live", "jobs", ["project_id", "name"], unique=True,
                    sqlite_where=_NEW_UNIQUE, postgresql_where=_NEW_UNIQUE)
    # Jobs that ended before this revision are not registered as models after the upgrade.
    jobs = sa.table("jobs", sa.column("phase"), sa.column("updated_at"),
                    sa.column("finalized_at"))
    op.execute(jobs.update().where(jobs.c.phase.in_(_ENDED))
               .values(finalized_at=jobs.c.updated_at))

    op.create_table(
        "job_families",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("project_id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("next_version", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["project_id"], ["projects.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "job_versions",
        sa.Column("job_id", sa.String(length=36), nullable=False),
        sa.Column("family_id", sa.String(length=36), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("parent_job_id", sa.String(length=36), nullable=True),
        sa.Column("parent_number", sa.Integer(), nullable=True),
        sa.Column("resume", sa.Boolean(), nullable=False),
        sa.Column("output_bases", sa.Text(), nullable=False),
        sa.Column("code_hash", sa.String(length=80), nullable=True),
        sa.Column("git_commit", sa.String(length=64), nullable=True),
        sa.Column("code_attempt", sa.Integer(), nullable=True),
        sa.Column("final_metrics", sa.Text(), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("job_id"),
    )
    op.create_index("ix_job_versions_family", "job_versions", ["family_id", "number"])
    op.create_table(
        "training_metrics",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("job_id", sa.String(length=36), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("task", sa.String(length=64), nullable=False),
        sa.Column("step", sa.BigInteger(), nullable=True),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("value", sa.Float(), nullable=False),
        sa.Column("time", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_training_metrics_job", "training_metrics", ["job_id", "id"])
    op.create_table(
        "metric_offsets",
        sa.Column("job_id", sa.String(length=36), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("task", sa.String(length=64), nullable=False),
        sa.Column("source", sa.String(length=8), nullable=False),
        sa.Column("position", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("job_id", "attempt", "task", "source"),
    )
    op.create_table(
        "models",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("project_id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("next_version", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["project_id"], ["projects.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("project_id", "name", name="ux_models_project_name"),
    )
    op.create_table(
        "model_versions",
        sa.Column("model_id", sa.String(length=36), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("location", sa.Text(), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.Column("file_count", sa.Integer(), nullable=False),
        sa.Column("source_job_id", sa.String(length=36), nullable=False),
        sa.Column("source_job_name", sa.String(length=64), nullable=False),
        sa.Column("source_version", sa.Integer(), nullable=True),
        sa.Column("source_channel", sa.String(length=64), nullable=False),
        sa.Column("source_phase", sa.String(length=16), nullable=False),
        sa.Column("metrics", sa.Text(), nullable=False),
        sa.Column("parameters", sa.Text(), nullable=False),
        sa.Column("inputs", sa.Text(), nullable=False),
        sa.Column("code_hash", sa.String(length=80), nullable=True),
        sa.Column("git_commit", sa.String(length=64), nullable=True),
        sa.ForeignKeyConstraint(["model_id"], ["models.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("model_id", "version"),
        sa.UniqueConstraint("model_id", "source_job_id", name="ux_model_versions_source"),
    )
    op.create_table(
        "model_aliases",
        sa.Column("model_id", sa.String(length=36), nullable=False),
        sa.Column("alias", sa.String(length=64), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["model_id"], ["models.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("model_id", "alias"),
    )


def downgrade() -> None:
    op.drop_table("model_aliases")
    op.drop_table("model_versions")
    op.drop_table("models")
    op.drop_table("metric_offsets")
    op.drop_index("ix_training_metrics_job", table_name="training_metrics")
    op.drop_table("training_metrics")
    op.drop_index("ix_job_versions_family", table_name="job_versions")
    op.drop_table("job_versions")
    op.drop_table("job_families")
    op.drop_index("ux_jobs_project_name_live", table_name="jobs")
    op.create_index("ux_jobs_project_name_live", "jobs", ["project_id", "name"], unique=True,
                    sqlite_where=_OLD_UNIQUE, postgresql_where=_OLD_UNIQUE)
    for column in ("finalized_at", "staging", "version", "family_id"):
        op.drop_column("jobs", column)
