"""Each node's use over time (`node_samples`): written with the tasks' samples, read by
the Nodes page."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa

from corral.store import rows, schema

SAMPLES = schema.node_samples
#: how long a node's samples are kept: a day
KEEP_MS = 24 * 3600 * 1000


def add(conn: sa.Connection, samples: Sequence[Mapping[str, Any]], now: int) -> None:
    """Record samples, and forget those older than KEEP_MS."""
    if samples:
        conn.execute(SAMPLES.insert(), [dict(s) for s in samples])
    conn.execute(SAMPLES.delete().where(SAMPLES.c.time < now - KEEP_MS))


def since(conn: sa.Connection, start: int) -> list[rows.NodeSample]:
    """Every node's samples from `start` (ms) on, oldest first."""
    q = (sa.select(SAMPLES).where(SAMPLES.c.time >= start)
         .order_by(SAMPLES.c.node, SAMPLES.c.time))
    return rows.NodeSample.all(conn.execute(q))
