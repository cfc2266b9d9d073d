"""A dataset version deleted on its own: its row stays, marked, so that its number is not
given to another version; its files are removed.

Revision ID: 0018
Revises: 0017
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("dataset_versions", sa.Column("deleted_at", sa.BigInteger))


def downgrade() -> None:
    op.drop_column("dataset_versions", "deleted_at")
