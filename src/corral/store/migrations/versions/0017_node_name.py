"""A job pinned to one node of its pool (`spec.resource.node_name`; a loop's service on
Sedna's node name).

Revision ID: 0017
Revises: 0016
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("node_name", sa.String(128), nullable=False,
                                    server_default=""))


def downgrade() -> None:
    op.drop_column("jobs", "node_name")
