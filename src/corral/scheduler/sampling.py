"""Periodic resource samples of every running task's process tree.

Usage is reported as ModelArts does, in percent of what the task was given: cpuUsage of
its flavor's cores (above 100 when it uses more than it asked for: corral accounts for
cores but does not cap them), memUsage of its flavor's memory, gpuMemUsage of its GPUs'
memory.
"""

from __future__ import annotations

from typing import Any

from corral.executors import base
from corral.scheduler import catalog as catalog_mod
from corral.store import db, job_repo


def sample_once(store: db.Store, executor: base.Executor, cat: catalog_mod.Catalog,
                now: int) -> int:
    with store.read() as conn:
        rows = job_repo.running_tasks(conn)
    out = []
    for row in rows:
        s = executor.sample(base.Handle.loads(row.handle))
        if s is not None:
            out.append(_row(row, s, cat, now))
    if out:
        with store.begin() as conn:
            job_repo.add_samples(conn, out)
    return len(out)


def _row(row: Any, s: base.Sample, cat: catalog_mod.Catalog, now: int) -> dict[str, Any]:
    n_gpu = len([g for g in row.gpu_ids.split(",") if g])
    gpu_total = sum(g.memory_mb for n in cat.nodes for g in n.gpus[:1]) * n_gpu
    return {
        "job_id": row.job_id, "attempt": row.attempt, "task": row.name, "time": now,
        "cpu_usage": s.cpu_percent / max(row.cpu, 0.01),
        "mem_usage": s.rss_mb / max(row.memory_mb, 1) * 100.0,
        "mem_mb": s.rss_mb,
        "gpu_util": s.gpu_util,
        "gpu_mem_usage": s.gpu_mem_mb / gpu_total * 100.0 if gpu_total else 0.0,
    }
