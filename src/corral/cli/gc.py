"""`corral gc`: apply the project's retention now, or see what it would remove."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from corral.cli import render

if TYPE_CHECKING:
    from corral.cli.state import State


@click.command(short_help="Remove ended jobs' logs and records as retention says.")
@click.option("--dry-run", is_flag=True, help="only list what would be removed")
@render.json_option()
@click.pass_obj
def gc(state: State, dry_run: bool, as_json: bool) -> None:
    """Apply the project's retention now (the server also does every `retention_interval`):
    ended jobs' logs and records older than the project keeps them, or beyond how many it
    keeps, are removed. Registered models and the jobs that made them are never removed.
    With --dry-run, only list what would go."""
    found = state.connect().retention(apply=not dry_run)
    if as_json:
        render.print_json(found)
        return
    what = "would remove" if dry_run else "removed"
    _table(state, f"records {what}", found.get("records") or [])
    _table(state, f"logs {what} (the records stay)", found.get("logs") or [])


def _table(state: State, title: str, removals: list[dict[str, Any]]) -> None:
    state.out.print(f"{title}: {len(removals)}")
    if not removals:
        return
    table = render.table("JOB", "NAME", "ENDED", "WHY")
    for r in removals:
        table.add_row(render.cell(r.get("job_id")), render.esc(render.cell(r.get("name"))),
                      render.time_ms(r.get("end_time")), render.esc(render.cell(r.get("why"))))
    state.out.print(table)


COMMANDS = (gc,)
