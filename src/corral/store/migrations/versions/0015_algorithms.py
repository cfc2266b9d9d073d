"""Saved algorithms that training jobs name by id (ModelArts' algorithm management).

Revision ID: 0015
Revises: 0014
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "algorithms",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("project_id", sa.String(64), sa.ForeignKey("projects.id"), nullable=False),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("description", sa.String(256), nullable=False),
        sa.Column("user_name", sa.String(128), nullable=False),
        sa.Column("body", sa.Text, nullable=False),
        sa.Column("create_time", sa.BigInteger, nullable=False),
        sa.Column("update_time", sa.BigInteger, nullable=False),
        sa.UniqueConstraint("project_id", "name", name="ux_algorithms_project_name"),
    )


def downgrade() -> None:
    op.drop_table("algorithms")
