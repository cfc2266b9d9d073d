"""Notebooks: JupyterLab sessions that run as owned training jobs and stop by themselves.

A notebook keeps its settings, its state and its latest session's secrets and lease in a
table of its own; its sessions are jobs owned by it (revision 0007), its events are
`kind_events`.

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "notebooks",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("project_id", sa.String(64), sa.ForeignKey("projects.id"), nullable=False),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("description", sa.String(512), nullable=False),
        sa.Column("user_name", sa.String(128), nullable=False),
        sa.Column("flavor_id", sa.String(128), nullable=False),
        sa.Column("image_id", sa.String(128), nullable=False),
        sa.Column("pool_id", sa.String(64)),
        sa.Column("workspace", sa.Text, nullable=False),
        sa.Column("volume", sa.Text, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("session", sa.Integer, nullable=False),
        sa.Column("lease_type", sa.String(8), nullable=False),
        sa.Column("lease_ms", sa.BigInteger, nullable=False),
        sa.Column("lease_updated_at", sa.BigInteger),
        sa.Column("started_at", sa.BigInteger),
        sa.Column("ready_at", sa.BigInteger),
        sa.Column("stops_at", sa.BigInteger),
        sa.Column("stop_requested_at", sa.BigInteger),
        sa.Column("stop_reason", sa.Text),
        sa.Column("port", sa.Integer),
        sa.Column("jupyter_token", sa.String(64)),
        sa.Column("access_token", sa.String(64)),
        sa.Column("cookie_secret", sa.String(64)),
        sa.Column("last_request_at", sa.BigInteger),
        sa.Column("last_active_at", sa.BigInteger),
        sa.Column("checked_at", sa.BigInteger),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_notebooks_project", "notebooks", ["project_id", "created_at"])
    op.create_index("ix_notebooks_state", "notebooks", ["state"])


def downgrade() -> None:
    op.drop_index("ix_notebooks_state", table_name="notebooks")
    op.drop_index("ix_notebooks_project", table_name="notebooks")
    op.drop_table("notebooks")
