"""`corral flavors`, `engines` and `info`: what a server offers and what it runs on."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click
import rich.table

from corral.cli import render

if TYPE_CHECKING:
    from corral.cli.state import State


@click.command(short_help="List the resource flavors jobs can ask for.")
@render.json_option()
@click.pass_obj
def flavors(state: State, as_json: bool) -> None:
    """List the resource flavors jobs can ask for (`spec.resource.flavor_id`), with what one
    node of each holds and how many nodes of it fit at once."""
    found = state.connect().flavors()
    if as_json:
        render.print_json(found)
        return
    table = render.table("ID", "NAME", "TYPE", "CPU", "GPU", "ACCELERATORS", "MEMORY",
                         "MAX NODES")
    for f in found.get("flavors", []):
        info = f.get("flavor_info") or {}
        cpu, gpu, mem = info.get("cpu") or {}, info.get("gpu") or {}, info.get("memory") or {}
        gpus = f"{gpu.get('unit_num')} x {gpu.get('product_name')}" if gpu.get("unit_num") else "-"
        accels = ", ".join(f"{a.get('unit_num')} {a.get('name')}"
                           for a in info.get("accelerators") or [] if isinstance(a, dict))
        table.add_row(
            render.cell(f.get("flavor_id")),
            render.esc(render.cell(f.get("flavor_name"))),
            render.cell(f.get("flavor_type")),
            render.cell(cpu.get("core_num")),
            render.esc(gpus),
            render.esc(accels) or "-",
            render.memory_sized(mem.get("size"), mem.get("unit")),
            render.cell(f.get("max_num")),
        )
    state.out.print(table)


@click.command(short_help="List the engines boot files can run on.")
@render.json_option()
@click.pass_obj
def engines(state: State, as_json: bool) -> None:
    """List the engines (Python interpreters) boot files can run on."""
    found = state.connect().engines()
    if as_json:
        render.print_json(found)
        return
    table = render.table("ID", "NAME", "VERSION")
    for e in found.get("items", []):
        table.add_row(
            render.cell(e.get("engine_id")), render.cell(e.get("engine_name")),
            render.cell(e.get("engine_version")),
        )
    state.out.print(table)


@click.command(short_help="Show the server the CLI talks to.")
@render.json_option()
@click.pass_obj
def info(state: State, as_json: bool) -> None:
    """Show which server the CLI talks to, its version, database, home, how it contains
    tasks, which server leads the scheduling (high availability), and its nodes."""
    api = state.connect()
    found = api.info()
    if as_json:
        render.print_json({"url": api.base_url, **found})
        return
    grid = render.grid()
    grid.add_row("server", api.base_url)
    for key in ("version", "default_project_id", "database", "home", "containment"):
        grid.add_row(key.replace("_", " "), render.esc(render.cell(found.get(key))))
    grid.add_row("leader", render.esc(_leader(found.get("leader"))))
    state.out.print(grid)
    nodes = found.get("nodes")
    if isinstance(nodes, list) and nodes and all(isinstance(n, dict) for n in nodes):
        state.out.print(_nodes_table(nodes))
    elif nodes is not None:
        state.out.print(f"nodes: {render.esc(render.compact(nodes))}")


def _leader(leader: Any) -> str:
    """Which server schedules, where, in which epoch, since when."""
    if not isinstance(leader, dict):
        return "none now (a standby takes over within seconds)"
    since = render.time_ms(leader.get("since"))
    here = ", this server" if leader.get("this_server") else ""
    return (f"{leader.get('name')} at {leader.get('url') or '?'} (epoch {leader.get('epoch')}, "
            f"since {since}{here})")


def _nodes_table(nodes: list[dict[str, Any]]) -> rich.table.Table:
    """One row per node; memory in GiB like everywhere else (the server says `memory_mb`)."""
    keys = list(nodes[0])
    table = render.table(*("MEMORY" if k == "memory_mb" else str(k).upper() for k in keys))
    for node in nodes:
        table.add_row(*(render.memory_mb(node.get(k)) if k == "memory_mb"
                        else render.esc(render.compact(node.get(k))) for k in keys))
    return table


COMMANDS = (flavors, engines, info)
