"""Each project's recent use of each pool, which fair share weighs the queue by.

The use is the dominant share the project's running jobs hold of the pool (its largest
fraction of any one resource), averaged over `fair_share_window` seconds by an
exponential moving average, updated every few seconds and kept in the database so that a
restarted server remembers who used what.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from corral.domain import resources, scheduling
from corral.store import rows

#: milliseconds between updates
EVERY_MS = 5_000


def update(saved: Sequence[rows.Usage], running: Sequence[scheduling.Running],
           nodes: Sequence[scheduling.Node], now: int, window_s: float,
           ) -> tuple[dict[tuple[str, str], float], list[rows.Usage] | None]:
    """The use per (project, pool) now, and the rows to save when it was updated (None
    when it is not due yet, or nothing was held and nothing is remembered)."""
    usage = {(u.project_id, u.pool_id): u.share for u in saved}
    last = max((u.updated_at for u in saved), default=None)
    if last is not None and now - last < EVERY_MS:
        return usage, None
    totals: dict[str, resources.Resources] = {}
    for n in nodes:
        totals[n.pool] = totals.get(n.pool, resources.ZERO) + n.capacity
    held: dict[tuple[str, str], resources.Resources] = {}
    for r in running:
        key = (r.project, r.pool)
        held[key] = held.get(key, resources.ZERO) + r.per_task.times(len(r.slots))
    keep = math.exp(-(now - last) / 1000 / window_s) if last is not None else 1.0
    out = {}
    for key in set(usage) | set(held):
        total = totals.get(key[1])
        share = resources.dominant_share(held.get(key, resources.ZERO), total) if total \
            else 0.0
        value = usage.get(key, 0.0) * keep + share * (1 - keep)
        if value > 1e-6 or key in held:
            out[key] = value
    if not out and not saved:
        return out, None
    return out, [rows.Usage(project_id=k[0], pool_id=k[1], share=v, updated_at=now)
                 for k, v in out.items()]
