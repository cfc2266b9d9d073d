"""Periodic resource samples of every running task's process tree.

Usage is reported as ModelArts does, in percent of what the task was given: cpuUsage of
its flavor's cores (above 100 when it uses more than it asked for: corral accounts for
cores but does not cap them), memUsage of its flavor's memory, gpuMemUsage of its GPUs'
memory.
"""

from __future__ import annotations

from typing import Any

from corral.domain import resources
from corral.executors import base
from corral.services import catalog as catalog_mod
from corral.store import db, job_repo, node_repo

#: seconds between samples of the nodes' own use, at least (the Nodes page's charts need
#: no finer grain, and a node's sample is written whether or not anything runs)
NODE_INTERVAL_S = 5.0


def sample_once(store: db.Store, executor: base.Executor, cat: catalog_mod.Catalog,
                now: int, *, nodes: bool = True) -> int:
    """One sample of every running task, and (with `nodes`) of every node that reports its
    use; the number of tasks sampled."""
    with store.read() as conn:
        rows = job_repo.running_tasks(conn)
    out = []
    for row in rows:
        handle = base.Handle.loads(row.handle)
        s = executor.sample(handle)
        if s is not None:
            out.append(_row(row, s, cat.node(handle.node), now))
    used = ([_node_row(u, now) for u in executor.node_usage()]
            if nodes and isinstance(executor, base.ReportsNodes) else [])
    if out or used:
        with store.begin() as conn:
            job_repo.add_samples(conn, out)
            if used:
                node_repo.add(conn, used, now)
    return len(out)


def _row(row: Any, s: base.Sample, node: resources.Node | None, now: int) -> dict[str, Any]:
    n_gpu = len([g for g in row.gpu_ids.split(",") if g])
    # The task's GPUs are its node's; a node's GPUs are alike, as a flavor counts them.
    gpu_total = node.gpus[0].memory_mb * n_gpu if node is not None and node.gpus else 0
    return {
        "job_id": row.job_id, "attempt": row.attempt, "task": row.name, "time": now,
        "cpu_usage": s.cpu_percent / max(row.cpu, 0.01),
        "mem_usage": s.rss_mb / max(row.memory_mb, 1) * 100.0,
        "mem_mb": s.rss_mb,
        "gpu_util": s.gpu_util,
        "gpu_mem_usage": s.gpu_mem_mb / gpu_total * 100.0 if gpu_total else 0.0,
    }


def _node_row(u: base.NodeUsage, now: int) -> dict[str, Any]:
    return {"node": u.node, "time": now, "cpu_percent": u.cpu_percent, "mem_mb": u.mem_mb,
            "gpu_util": u.gpu_util, "gpu_mem_mb": u.gpu_mem_mb}
