"""Leadership: the lease that lets one of several servers on one database schedule, with
an epoch every scheduler write checks (its fencing token). One row, id 1, never held.

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    table = op.create_table(
        "leadership",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("holder", sa.String(255)),
        sa.Column("url", sa.Text),
        sa.Column("epoch", sa.BigInteger, nullable=False),
        sa.Column("acquired_at", sa.BigInteger, nullable=False),
        sa.Column("expires_at", sa.BigInteger, nullable=False),
    )
    op.bulk_insert(table, [{"id": 1, "holder": None, "url": None, "epoch": 0,
                            "acquired_at": 0, "expires_at": 0}])


def downgrade() -> None:
    op.drop_table("leadership")
