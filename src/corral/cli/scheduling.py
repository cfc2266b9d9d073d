"""`corral queue`, `pools` and `quota`: who waits for what, and who may use how much."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from corral.cli import render

if TYPE_CHECKING:
    from corral.cli.state import State

#: nodes of a pool `corral pools` names (a Ray cluster may have hundreds)
NODES_SHOWN = 20


@click.command(short_help="Show the jobs waiting in each pool, in order.")
@click.option("--pool", "pool_id", help="only this pool")
@render.json_option()
@click.pass_obj
def queue(state: State, pool_id: str | None, as_json: bool) -> None:
    """Show the jobs waiting in each pool, in the order they will start, with why each
    waits. Jobs of other projects show only their project, size and reason."""
    api = state.connect()
    found = api.queue(pool_id)
    if as_json:
        render.print_json(found)
        return
    names = _project_names(api.whoami(), api.pools())
    for pool in found.get("pools", []):
        jobs = pool.get("jobs", [])
        state.out.print(f"[bold]pool {render.esc(str(pool.get('pool_id')))}[/]: "
                        f"{len(jobs)} waiting")
        if not jobs:
            continue
        table = render.table("#", "ID", "NAME", "PROJECT", "PRIO", "FLAVOR", "NODES", "WAIT",
                             "REASON")
        for j in jobs:
            table.add_row(str(j.get("position")), j.get("id") or "-",
                          render.esc(j.get("name") or "-"),
                          render.esc(names.get(str(j.get("project_id")), "another project")),
                          render.cell(j.get("priority")),
                          render.cell(j.get("flavor_id")), render.cell(j.get("node_count")),
                          render.cell(j.get("wait_code")), render.esc(j.get("reason") or ""))
        state.out.print(table)


def _project_names(me: dict[str, Any], pools: dict[str, Any]) -> dict[str, str]:
    """The names of the projects the user may know: theirs, and those the pools name (each
    project that uses a pool or has a quota there is named to every member); a job of any
    other is "another project", never an id."""
    names = {p["project_id"]: p["name"] for pool in pools.get("pools", [])
             for p in pool.get("projects", []) if p.get("name")}
    names.update({p["project_id"]: p["name"] for p in me.get("projects", [])})
    return names


@click.command(short_help="Show each pool's capacity, use and quotas.")
@render.json_option()
@click.pass_obj
def pools(state: State, as_json: bool) -> None:
    """Show each pool's capacity and use, and use and quota per project."""
    found = state.connect().pools()
    if as_json:
        render.print_json(found)
        return
    for pool in found.get("pools", []):
        cap, used = pool.get("capacity") or {}, pool.get("used") or {}
        runs = render.esc(str(pool.get("executor") or "local"))
        if pool.get("address"):
            runs += f" at {render.esc(str(pool['address']))}"
        state.out.print(
            f"[bold]pool {render.esc(str(pool.get('pool_id')))}[/] ({runs}): "
            f"{len(pool.get('nodes') or [])} node(s), {_amounts(used)} used of {_amounts(cap)}"
            f", {pool.get('pending_jobs', 0)} waiting")
        nodes = pool.get("nodes") or []
        if nodes:  # (the names a job's spec.resource.node_name gives)
            shown = ", ".join(f"{render.esc(str(n.get('name')))} ({_amounts(n)})"
                              for n in nodes[:NODES_SHOWN])
            more = f", and {len(nodes) - NODES_SHOWN} more" if len(nodes) > NODES_SHOWN else ""
            state.out.print(f"nodes: {shown}{more}")
        table = render.table("PROJECT", "NAME", "USED", "QUOTA", "BORROWING", "WEIGHT",
                             "RECENT SHARE")
        for p in pool.get("projects") or []:
            limits = p.get("limits")
            table.add_row(str(p.get("project_id")), render.esc(p.get("name") or ""),
                          _amounts(p.get("used") or {}),
                          _amounts(limits) if limits else ("-" if limits is None else "none"),
                          "yes" if p.get("borrowing") else "no",
                          render.cell(p.get("weight", 1.0)),
                          f"{100 * float(p.get('recent_share') or 0):.1f}%")
        state.out.print(table)


@click.command(short_help="Show the project's quotas, or set one.")
@click.option("--pool", "pool_id", help="the pool to set a quota in (omit to show quotas)")
@click.option("--cpu", type=click.FloatRange(min=0), help="cores")
@click.option("--memory-gb", type=click.FloatRange(min=0), help="memory in GiB")
@click.option("--gpu", type=click.IntRange(min=0), help="GPUs")
@click.option("--accel", "accel", multiple=True, metavar="NAME=N",
              help="a limit on an accelerator by name (repeatable), e.g. --accel npu=8")
@click.option("--borrowing/--no-borrowing", default=False,
              help="may use idle capacity beyond the quota (reclaimed first)")
@click.option("--weight", type=click.FloatRange(min=0, min_open=True), default=1.0,
              show_default=True, help="fair share against other projects")
@click.option("--remove", is_flag=True, help="remove the quota in --pool")
@render.json_option()
@click.pass_obj
def quota(state: State, pool_id: str | None, cpu: float | None, memory_gb: float | None,
          gpu: int | None, accel: tuple[str, ...], borrowing: bool, weight: float,
          remove: bool, as_json: bool) -> None:
    """Show the project's quotas; with --pool, set (platform admin) or --remove its quota
    in that pool. A limit left out is no limit."""
    api = state.connect()
    found = api.quotas()
    if pool_id:
        # The other pools' quotas are sent back as they are.
        rows = [{k: q["limits"].get(k) for k in ("cpu", "memory_gb", "gpu", "accelerators")}
                | {"pool_id": q["pool_id"], "borrowing": q["borrowing"], "weight": q["weight"]}
                for q in found.get("quotas", []) if q["pool_id"] != pool_id]
        if not remove:
            rows.append({"pool_id": pool_id, "cpu": cpu, "memory_gb": memory_gb, "gpu": gpu,
                         "accelerators": _named_counts(accel) or None,
                         "borrowing": borrowing, "weight": weight})
        found = api.set_quotas(rows)
    if as_json:
        render.print_json(found)
        return
    table = render.table("POOL", "QUOTA", "USED", "BORROWING", "WEIGHT")
    for q in found.get("quotas", []):
        table.add_row(q["pool_id"], _amounts(q.get("limits") or {}) or "none",
                      _amounts(q.get("used") or {}), "yes" if q.get("borrowing") else "no",
                      render.cell(q.get("weight")))
    state.out.print(table)


def _amounts(a: dict[str, Any]) -> str:
    """`2 CPU, 23.5 GiB, 0 GPU, 1 npu`: the parts that are given."""
    parts = []
    if a.get("cpu") is not None:
        parts.append(f"{a['cpu']:g} CPU")
    if a.get("memory_gb") is not None:
        parts.append(render.memory(a["memory_gb"]))
    if a.get("gpu") is not None:
        parts.append(f"{a['gpu']:g} GPU")
    parts += [f"{n:g} {name}" for name, n in sorted((a.get("accelerators") or {}).items())]
    return ", ".join(parts)


def _named_counts(items: tuple[str, ...]) -> dict[str, int]:
    out = {}
    for item in items:
        name, _, n = item.partition("=")
        if not name or not n.strip().isdigit():
            raise click.BadParameter(f"'{item}' is not NAME=N", param_hint="--accel")
        out[name.strip()] = int(n)
    return out


COMMANDS = (queue, pools, quota)
