"""Dataset versions (a dataset's samples frozen for jobs to read), and the dataset versions a
model version's job read (its lineage).

Revision ID: 0016
Revises: 0015
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "dataset_versions",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("dataset_id", sa.String(36),
                  sa.ForeignKey("datasets.id", ondelete="CASCADE"), nullable=False),
        sa.Column("project_id", sa.String(64), sa.ForeignKey("projects.id"), nullable=False),
        sa.Column("number", sa.Integer, nullable=False),
        sa.Column("description", sa.String(256), nullable=False),
        sa.Column("location", sa.Text, nullable=False),
        sa.Column("format", sa.String(8), nullable=False),
        sa.Column("number_of_samples", sa.BigInteger, nullable=False),
        sa.Column("size_bytes", sa.BigInteger, nullable=False),
        sa.Column("content_hash", sa.String(80), nullable=False),
        sa.Column("files", sa.Text, nullable=False),
        sa.Column("user_name", sa.String(128), nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.UniqueConstraint("dataset_id", "number", name="ux_dataset_versions_number"),
    )
    op.add_column("model_versions", sa.Column("datasets", sa.Text, nullable=False,
                                              server_default="[]"))


def downgrade() -> None:
    with op.batch_alter_table("model_versions") as batch:
        batch.drop_column("datasets")
    op.drop_table("dataset_versions")
