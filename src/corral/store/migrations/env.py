"""Alembic environment: corral always hands in an open connection."""

from __future__ import annotations

from alembic import context

from corral.store import schema

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=schema.metadata,
                  render_as_batch=connection.dialect.name == "sqlite")
with context.begin_transaction():
    context.run_migrations()
