"""How stored rows look to API clients: the ModelArts Job object and its friends."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Annotated, Any

import sqlalchemy as sa
from fastapi import Query

from corral.domain import downsample, jobs, resources
from corral.services import catalog as catalog_mod
from corral.services import pools
from corral.store import job_repo, rows


def job(conn: sa.Connection | None, row: rows.Job, cat: catalog_mod.Catalog, now: int, *,
        fresh: bool = False) -> dict[str, Any]:
    """The Job object. A `fresh` job (its row read as it was created, Creating) has no
    running records nor place in the queue to look up: it needs no connection."""
    if fresh:
        return _job(row, cat, now, [], [], None)
    assert conn is not None
    return jobs_list(conn, [row], cat, now)[0]


def jobs_list(conn: sa.Connection, found: Sequence[rows.Job], cat: catalog_mod.Catalog,
              now: int) -> list[dict[str, Any]]:
    """The Job objects of several jobs, their running records and queue places read
    together (a page of a search costs the same few queries as one job)."""
    ahead = pools.jobs_ahead(conn, cat, [r.id for r in found
                                         if r.phase == jobs.Phase.PENDING.value])
    records = job_repo.records_of(conn, [r.id for r in found])
    return [_job(r, cat, now, *records[r.id], ahead.get(r.id)) for r in found]


def _job(row: rows.Job, cat: catalog_mod.Catalog, now: int, attempts: Sequence[rows.Attempt],
         tasks: Sequence[rows.Task], ahead: int | None) -> dict[str, Any]:
    spec = json.loads(row.spec)
    out: dict[str, Any] = {
        "kind": row.kind,
        "metadata": {
            "id": row.id, "name": row.name, "workspace_id": spec["metadata"].get(
                "workspace_id", "0"), "description": row.description,
            "create_time": row.create_time, "user_name": row.user_name,
            "annotations": spec["metadata"].get("annotations", {}),
        },
        "status": status(row, attempts, tasks, now, ahead),
        "algorithm": algorithm(spec["algorithm"]),
        "spec": job_spec(spec.get("spec", {}), row, cat),
    }
    if row.version:  # corral: which version of its family the job is (V0001, ...)
        out["metadata"].update(version=f"V{row.version:04d}", family_id=row.family_id)
    if row.owner_kind:  # corral: the object of a job kind that made it (a pipeline, ...)
        out["metadata"]["owner"] = {"kind": row.owner_kind, "id": row.owner_id,
                                    "role": row.owner_role}
    if spec.get("model"):  # corral: the registered model an inference job runs
        out["model"] = spec["model"]
    return out


def status(row: rows.Job, attempts: Sequence[rows.Attempt], tasks: Sequence[rows.Task],
           now: int, ahead: int | None) -> dict[str, Any]:
    start = row.start_time or 0
    end = row.end_time or now
    return {
        "phase": row.phase,
        "secondary_phase": row.secondary_phase,
        "duration": max(0, end - start) if start else 0,
        "start_time": start,
        "tasks": jobs.task_names(row.node_count),
        "task_statuses": [
            {k: v for k, v in (("task", t.name), ("exit_code", t.exit_code),
                               ("message", t.message)) if v is not None}
            for t in tasks],
        "running_records": [running_record(a) for a in attempts],
        "node_count_metrics": node_count_metrics(attempts, row.node_count),
        "reason": reason(row, ahead, now),
        "failure_class": row.failure_class,
        **({"restart_at": row.restart_at} if row.restart_at is not None
           and row.phase == jobs.Phase.RUNNING.value else {}),
        **({"queue": queue_info(row, ahead)} if row.phase == jobs.Phase.PENDING.value else {}),
        **({"borrowed": True} if row.borrowed and row.phase in ACTIVE else {}),
        **({"preempting": True} if row.preempt_requested_at is not None
           and row.phase in ACTIVE else {}),
    }


ACTIVE = frozenset(p.value for p in jobs.ACTIVE)


def reason(row: rows.Job, ahead: int | None, now: int | None = None) -> str | None:
    """Why the job waits (its place in the queue, or what it lacks; when it restarts after
    a failure, counted from `now`) or why it failed."""
    if (ahead is not None and row.phase == jobs.Phase.PENDING.value
            and row.wait_code in pools.PLAIN_WAIT):
        return pools.queued_reason(ahead)
    if row.restart_at is not None and row.phase == jobs.Phase.RUNNING.value:
        left = "" if now is None else f" in {max(0, -(-(row.restart_at - now) // 1000))} s"
        return f"restarting{left} {row.wait_reason or ''}".rstrip()
    return row.wait_reason or row.failure_message


def queue_info(row: rows.Job, ahead: int | None) -> dict[str, Any]:
    """corral: where a waiting job stands (`wait_code` is a domain.scheduling.WaitCode)."""
    return {"pool_id": row.pool_id, "priority": row.priority, "jobs_ahead": ahead or 0,
            "wait_code": row.wait_code or "queued"}


def running_record(a: rows.Attempt) -> dict[str, Any]:
    rec = {"start_at": a.start_at // 1000, "start_type": a.start_type}
    if a.end_at is not None:
        rec["end_at"] = a.end_at // 1000
    for key in ("end_reason", "end_related_task", "end_recover", "failure_class"):
        if getattr(a, key):
            rec[key] = getattr(a, key)
    return rec


def node_count_metrics(attempts: Sequence[rows.Attempt], node_count: int) -> list[list[int]]:
    """[time ms, nodes running] at each change, derived from the running records."""
    points: list[list[int]] = []
    for a in attempts:
        points.append([a.start_at, node_count])
        if a.end_at is not None:
            points.append([a.end_at, 0])
    return points


def algorithm(alg: dict[str, Any]) -> dict[str, Any]:
    out = dict(alg)
    # The reference's response shape is a list of maps (the request's is one map).
    out["environments"] = [{k: v} for k, v in alg.get("environments", {}).items()]
    return out


def job_spec(spec: dict[str, Any], row: rows.Job, cat: catalog_mod.Catalog) -> dict[str, Any]:
    out = dict(spec)
    res = dict(spec.get("resource", {}))
    res.setdefault("policy", "regular")
    res["flavor_id"] = row.flavor_id
    res["node_count"] = row.node_count
    res["pool_id"] = row.pool_id
    flav = _flavor_or_row(cat, row)
    res["flavor_name"] = flav.flavor_name
    res["flavor_detail"] = flavor_detail(flav, cat.disk_gb)
    out["resource"] = res
    return out


def _flavor_or_row(cat: catalog_mod.Catalog, row: rows.Job) -> resources.Flavor:
    for f in cat.flavors:
        if f.flavor_id == row.flavor_id:
            return f
    # The flavor was removed from configuration since; show what the job was given.
    return resources.Flavor(flavor_id=row.flavor_id, flavor_name=row.flavor_id, cpu=row.cpu,
                            memory_gb=max(1, row.memory_mb // 1024), gpu=row.gpu,
                            accelerators=tuple(resources.Accelerator(k, n) for k, n in
                                               resources.parse_accels(row.accelerators)))


def flavor_detail(f: resources.Flavor, disk_gb: int | None = None) -> dict[str, Any]:
    """A job's flavor_detail; `disk_gb`: the room for jobs on the run folders' disk
    (catalog.Catalog.disk_gb), a string here as the reference has it."""
    info: dict[str, Any] = {
        "max_num": f.max_num,
        "cpu": {"arch": f.arch, "core_num": core_num(f.cpu)},
        "memory": {"size": f.memory_gb, "unit": "GB"},
    }
    if disk_gb is not None:
        info["disk"] = {"size": str(disk_gb), "unit": "GB"}
    if f.gpu:
        info["gpu"] = {"unit_num": f.gpu, "product_name": f.gpu_product, "memory": f.gpu_memory}
    npu = f.npu
    if npu is not None:  # as documented: unit_num is a string here
        info["npu"] = {"unit_num": str(npu.count), "product_name": npu.product_name,
                       "memory": npu.memory}
    if f.accelerators:  # corral: every accelerator by name, NPUs too
        info["accelerators"] = [{"name": a.name, "unit_num": a.count,
                                 "product_name": a.product_name, "memory": a.memory}
                                for a in f.accelerators]
    units = f.gpu or (npu.count if npu else 0)
    return {"flavor_type": f.flavor_type,
            "billing": {"code": f.flavor_id, "unit_num": max(1, units)},
            "flavor_info": info}


def core_num(cpu: float) -> int | float:
    """Whole cores as an integer, as documented (SDKs read `1.0` into their int field only
    by coercion); a configured fraction of a core is shown as it is rather than rounded."""
    return int(cpu) if float(cpu).is_integer() else cpu


def flavor(f: resources.Flavor, disk_gb: int | None = None) -> dict[str, Any]:
    """A flavor as the flavors' list has it (its disk's size a number there)."""
    out = {"flavor_id": f.flavor_id, "flavor_name": f.flavor_name, "max_num": f.max_num,
           **flavor_detail(f), "attributes": {}}
    if disk_gb is not None:
        out["flavor_info"]["disk"] = {"size": disk_gb, "unit": "GB"}
    return out


def event(e: rows.Event) -> dict[str, Any]:
    return {"message": e.message, "level": e.level, "time": str(e.time), "source": e.source}


#: `?points=N`: long series are downsampled on the server to about N points
Points = Annotated[int | None, Query(
    ge=10, le=100_000, description="downsample each series to at most this many points: "
    "reported metrics keep each bucket's lowest and highest value, resource samples "
    "its mean")]


def metric_series(points: Sequence[rows.MetricPoint],
                  most: int | None = None) -> list[dict[str, Any]]:
    """Reported training metrics, one series per metric name, in the order reported;
    each at most `most` points long (domain.downsample.extremes), if given."""
    by_name: dict[str, dict[str, Any]] = {}
    for p in points:
        s = by_name.setdefault(p.name, {"metric": p.name, "value": [], "steps": [],
                                        "times": [], "tasks": []})
        s["value"].append(p.value)
        s["steps"].append(p.step)
        s["times"].append(p.time)
        s["tasks"].append(p.task)
    out = list(by_name.values())
    if most is not None:
        for s in out:
            keep = downsample.extremes(s["value"], most)
            if len(keep) < len(s["value"]):
                for key in ("value", "steps", "times", "tasks"):
                    s[key] = [s[key][i] for i in keep]
    return out
