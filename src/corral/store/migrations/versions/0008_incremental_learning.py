"""Incremental learning: datasets, loops, their rounds and deploys, and alias history.

- `datasets`: an index file of samples (local or s3://) and its number of samples.
- `il_loops`: incremental-learning loops (Sedna's IncrementalLearningJob): the spec, the
  state, and what the loop holds of its dataset (how far it is split, the training samples
  waiting, the evaluation versions), so that a restarted server goes on where it was.
- `il_rounds`: one record per round: trigger, jobs, the evaluation set's hash, both
  models' metrics, the verdict and the rule that gave it, the deploy.
- `il_deploys`: each model written for a loop's service, and whether the service
  acknowledged loading it.
- `model_alias_history`: every move of a model alias (from which version to which, who,
  when, why), so that what an alias named at any time has an answer and can be rolled back.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "datasets",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("project_id", sa.String(64), sa.ForeignKey("projects.id"), nullable=False),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("description", sa.String(256), nullable=False),
        sa.Column("url", sa.Text, nullable=False),
        sa.Column("format", sa.String(8), nullable=False),
        sa.Column("number_of_samples", sa.BigInteger, nullable=False),
        sa.Column("stamp", sa.String(256)),
        sa.Column("checked_at", sa.BigInteger),
        sa.Column("user_name", sa.String(128), nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
        sa.UniqueConstraint("project_id", "name", name="ux_datasets_project_name"),
    )
    op.create_table(
        "il_loops",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("project_id", sa.String(64), sa.ForeignKey("projects.id"), nullable=False),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("description", sa.String(256), nullable=False),
        sa.Column("user_name", sa.String(128), nullable=False),
        sa.Column("spec", sa.Text, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("dataset_id", sa.String(36), sa.ForeignKey("datasets.id"), nullable=False),
        sa.Column("initial_model", sa.String(64), nullable=False),
        sa.Column("initial_version", sa.Integer, nullable=False),
        sa.Column("eval_model", sa.String(64)),
        sa.Column("eval_version", sa.Integer),
        sa.Column("rounds", sa.Integer, nullable=False),
        sa.Column("failed_rounds", sa.Integer, nullable=False),
        sa.Column("not_before", sa.BigInteger),
        sa.Column("next_check_at", sa.BigInteger, nullable=False),
        sa.Column("trigger_requested_at", sa.BigInteger),
        sa.Column("trigger_requested_by", sa.String(128)),
        sa.Column("split_upto", sa.BigInteger, nullable=False),
        sa.Column("train_pending", sa.Text, nullable=False),
        sa.Column("eval_versions", sa.Text, nullable=False),
        sa.Column("deploys", sa.Integer, nullable=False),
        sa.Column("services", sa.Integer, nullable=False),
        sa.Column("hard_examples_read", sa.BigInteger, nullable=False),
        sa.Column("message", sa.Text),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
        sa.UniqueConstraint("project_id", "name", name="ux_il_loops_project_name"),
    )
    op.create_table(
        "il_rounds",
        sa.Column("loop_id", sa.String(36), sa.ForeignKey("il_loops.id", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("number", sa.Integer, primary_key=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("started_at", sa.BigInteger, nullable=False),
        sa.Column("ended_at", sa.BigInteger),
        sa.Column("trigger", sa.Text, nullable=False),
        sa.Column("train_ranges", sa.Text, nullable=False),
        sa.Column("train_samples", sa.Integer, nullable=False),
        sa.Column("eval_samples", sa.Integer, nullable=False),
        sa.Column("eval_hash", sa.String(80), nullable=False),
        sa.Column("base_model", sa.String(64), nullable=False),
        sa.Column("base_version", sa.Integer, nullable=False),
        sa.Column("current_model", sa.String(64)),
        sa.Column("current_version", sa.Integer),
        sa.Column("train_job_id", sa.String(36)),
        sa.Column("eval_job_id", sa.String(36)),
        sa.Column("new_version", sa.Integer),
        sa.Column("metrics_new", sa.Text),
        sa.Column("metrics_current", sa.Text),
        sa.Column("decision", sa.String(16)),
        sa.Column("rule", sa.Text),
        sa.Column("deploy_seq", sa.Integer),
        sa.Column("message", sa.Text),
    )
    op.create_table(
        "il_deploys",
        sa.Column("loop_id", sa.String(36), sa.ForeignKey("il_loops.id", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("seq", sa.Integer, primary_key=True),
        sa.Column("round", sa.Integer),
        sa.Column("model_name", sa.String(64), nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("token", sa.String(64), nullable=False),
        sa.Column("moves_alias", sa.Boolean, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("user_name", sa.String(128), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("service_role", sa.String(64)),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("written_at", sa.BigInteger),
        sa.Column("deadline", sa.BigInteger),
        sa.Column("ended_at", sa.BigInteger),
        sa.Column("message", sa.Text),
    )
    op.create_table(
        "model_alias_history",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("model_id", sa.String(36), sa.ForeignKey("models.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("alias", sa.String(64), nullable=False),
        sa.Column("from_version", sa.Integer),
        sa.Column("to_version", sa.Integer),
        sa.Column("time", sa.BigInteger, nullable=False),
        sa.Column("user_name", sa.String(128), nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
    )
    op.create_index("ix_model_alias_history_alias", "model_alias_history",
                    ["model_id", "alias", "id"])


def downgrade() -> None:
    op.drop_index("ix_model_alias_history_alias", table_name="model_alias_history")
    for table in ("model_alias_history", "il_deploys", "il_rounds", "il_loops", "datasets"):
        op.drop_table(table)
