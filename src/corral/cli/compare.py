"""`corral compare JOB JOB...`: any runs of the project side by side.

`diff` compares two versions of one job; this compares any jobs (search trials, versions,
unrelated runs): their phase, flavor, duration, parameters, final metrics, and per metric
the last and best value of its curve. A row whose values differ between the jobs is marked
with `*`. It reads only what `show` and `metrics` read (`get_job`, `training_metrics`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import click

from corral.cli import render

if TYPE_CHECKING:
    from corral.cli.state import State

#: metric names whose best value is the lowest; any other metric's best is its highest
_LOWER_IS_BETTER = re.compile(r"loss|err|mse|mae|perplexity|ppl|latency", re.IGNORECASE)


def direction(metric: str) -> str:
    """`min` for a metric named like a loss or an error, else `max`."""
    return "min" if _LOWER_IS_BETTER.search(metric) else "max"


def _curves(found: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out = {}
    for s in found.get("metrics") or []:
        values = [v for v in s.get("value") or [] if isinstance(v, int | float)]
        if not values:
            continue
        way = direction(s["metric"])
        out[s["metric"]] = {"last": values[-1], "best": min(values) if way == "min"
                            else max(values), "direction": way, "points": len(values)}
    return out


def _run(state: State, ref: str) -> dict[str, Any]:
    api = state.connect()
    job_id = state.job_id(ref)
    job = api.get_job(job_id)
    metrics = api.training_metrics(job_id)
    meta, status = job["metadata"], job.get("status") or {}
    resource = (job.get("spec") or {}).get("resource") or {}
    params = (job.get("algorithm") or {}).get("parameters") or []
    return {"id": meta["id"], "name": meta.get("name"), "version": meta.get("version"),
            "phase": render.phase_label(status), "flavor_id": resource.get("flavor_id"),
            "duration": status.get("duration"),
            "parameters": {p["name"]: p.get("value", "") for p in params},
            "final_metrics": metrics.get("final_metrics") or {},
            "metrics": _curves(metrics)}


def _names(runs: list[dict[str, Any]], group: str) -> list[str]:
    seen: dict[str, None] = {}
    for r in runs:
        seen.update(dict.fromkeys(r[group]))
    return list(seen)


def rows(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The comparison, a row per field: its section, name, one value per job (None where a
    job has none) and whether the values differ."""
    out: list[dict[str, Any]] = []

    def add(section: str, name: str, values: list[Any], shown: list[Any] | None = None) -> None:
        seen = values if shown is None else shown
        out.append({"section": section, "name": name, "values": values,
                    "differs": any(v != seen[0] for v in seen)})

    for key in ("phase", "flavor_id"):
        add("job", key, [r[key] for r in runs])
    # Durations differ by milliseconds in every pair of runs: only one seen to differ counts.
    durations = [r["duration"] for r in runs]
    add("job", "duration", durations, [render.duration(d) for d in durations])
    for name in _names(runs, "parameters"):
        add("parameters", name, [r["parameters"].get(name) for r in runs])
    for name in _names(runs, "final_metrics"):
        add("final_metrics", name, [r["final_metrics"].get(name) for r in runs])
    for name in _names(runs, "metrics"):
        for what in ("last", "best"):
            add(f"curve_{what}", name, [(r["metrics"].get(name) or {}).get(what)
                                        for r in runs])
    return out


def _label(row: dict[str, Any]) -> str:
    section, name = row["section"], row["name"]
    if section == "job":
        return "flavor" if name == "flavor_id" else name
    if section == "parameters":
        return f"--{name}"
    if section == "final_metrics":
        return f"final {name}"
    what = section.removeprefix("curve_")
    return f"{name} {what} ({direction(name)})" if what == "best" else f"{name} {what}"


def _value(row: dict[str, Any], value: Any) -> str:
    if row["name"] == "duration" and row["section"] == "job":
        return render.duration(value)
    if isinstance(value, float):
        return f"{value:.6g}"
    return render.cell(value)


@click.command(short_help="Compare runs side by side: parameters and metrics.")
@click.argument("jobs", nargs=-1, required=True)
@render.json_option()
@click.pass_obj
def compare(state: State, jobs: tuple[str, ...], as_json: bool) -> None:
    """Show two or more JOBs side by side (search trials, versions, any runs of the
    project): phase, flavor, duration, parameters, final metrics, and each metric's last
    and best value. Rows whose values differ are marked with *."""
    if len(jobs) < 2:
        raise click.UsageError("give two or more jobs to compare")
    runs = [_run(state, ref) for ref in jobs]
    table_rows = rows(runs)
    if as_json:
        render.print_json({"jobs": runs, "rows": table_rows})
        return
    table = render.table("", "", *(f"{r['name']} {r['version'] or ''}".strip() for r in runs))
    table.add_row("", "id", *(r["id"] for r in runs))
    for row in table_rows:
        mark, style = ("*", "bold yellow") if row["differs"] else ("", "")
        cells = [_value(row, v) for v in row["values"]]
        table.add_row(mark, _label(row),
                      *(f"[{style}]{render.esc(c)}[/]" if style else render.esc(c)
                        for c in cells))
    state.out.print(table)
    state.out.print("[dim]* differs between the jobs[/]")


COMMANDS = (compare,)
