"""Alembic environment: corral always hands in an open connection."""

from __future__ import annotations

from alembic import context

from corral.store import kind_tables, schema

connection = context.config.attributes["connection"]
# (kind_tables: the job kinds' tables, on the same metadata)
assert kind_tables.metadata is schema.metadata
context.configure(connection=connection, target_metadata=schema.metadata,
                  render_as_batch=connection.dialect.name == "sqlite")
with context.begin_transaction():
    context.run_migrations()
