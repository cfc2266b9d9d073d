"""`corral versions`, `diff`, `new-version`, `metrics` and `models ...`: the CLI of job
versions, the metrics jobs report and the model registry.

Kept apart from `corral.cli` (which adds these commands to its group) so that each file
stays about one thing; the commands get the CLI's `State` as click's context object.
"""

from __future__ import annotations

import pathlib
import sys
from typing import Any

import click

from corral import terminal


def install(group: click.Group) -> None:
    for command in (versions, diff, new_version, training_metrics, models):
        group.add_command(command)


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return terminal.cell(value)


def _short(text: Any, n: int = 19) -> str:
    return terminal.cell(text)[:n] if text else "-"


# -- versions -------------------------------------------------------------------------------


@click.command()
@click.argument("job_id")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def versions(state: Any, job_id: str, as_json: bool) -> None:
    """List the versions of a training job (JOB_ID: any of its versions)."""
    found = state.connect().versions(job_id)
    if as_json:
        terminal.print_json(found)
        return
    table = terminal.table("VERSION", "ID", "FROM", "PHASE", "DURATION", "CODE", "FINAL METRICS")
    for v in found.get("versions", []):
        final = "  ".join(f"{k}={_fmt(x)}" for k, x in (v.get("final_metrics") or {}).items())
        source = terminal.cell(v.get("pre_version_name")) + (" (resumed)" if v.get("resume")
                                                              else "")
        table.add_row(v["version_name"], v["version_id"], source,
                      terminal.phase_label(v), terminal.duration(v.get("duration")),
                      _short(v.get("code_hash")), final or "-")
    state.out.print(f"[bold]{terminal.esc(found.get('job_name', ''))}[/] "
                    f"({found.get('version_count', 0)} version(s))")
    state.out.print(table)


def _diff_rows(a: dict[str, Any], b: dict[str, Any]) -> list[tuple[str, str, str]]:
    rows = []
    for key in ("phase", "flavor_id", "node_count", "code_dir", "boot_file", "command",
                "code_hash", "git_commit", "pre_version_name", "resume"):
        rows.append((key.replace("_", " "), _fmt(a.get(key)), _fmt(b.get(key))))
    rows.append(("duration", terminal.duration(a.get("duration")),
                 terminal.duration(b.get("duration"))))
    for group, label in (("parameters", "--"), ("inputs", "input "), ("outputs", "output "),
                         ("final_metrics", "metric ")):
        left, right = a.get(group) or {}, b.get(group) or {}
        for name in sorted(set(left) | set(right)):
            rows.append((f"{label}{name}", _fmt(left.get(name)), _fmt(right.get(name))))
    return rows


@click.command()
@click.argument("job_id")
@click.argument("left")
@click.argument("right")
@click.option("--all", "show_all", is_flag=True, help="also show what did not change")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def diff(state: Any, job_id: str, left: str, right: str, show_all: bool, as_json: bool) -> None:
    """Show what differs between versions LEFT and RIGHT (V0001, 2, ...) of a job."""
    api = state.connect()
    a, b = api.version(job_id, left), api.version(job_id, right)
    rows = _diff_rows(a, b)
    changed = [r for r in rows if r[1] != r[2]]
    if as_json:
        terminal.print_json({"left": a, "right": b,
                             "changed": {name: {"left": x, "right": y}
                                         for name, x, y in changed}})
        return
    table = terminal.table("", a["version_name"], b["version_name"])
    for name, x, y in rows if show_all else changed:
        style = "bold yellow" if x != y else "dim"
        table.add_row(name, f"[{style}]{terminal.esc(x)}[/]", f"[{style}]{terminal.esc(y)}[/]")
    state.out.print(table)
    if not changed:
        state.out.print("[dim]no differences[/]")


def _pairs(values: tuple[str, ...], what: str) -> dict[str, str]:
    out = {}
    for item in values:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise terminal.Failure(f"{what} '{item}': expected NAME=VALUE")
        out[name] = value
    return out


@click.command(name="new-version")
@click.argument("job_id")
@click.option("--from", "from_version", help="version to start from (default: JOB_ID's)")
@click.option("-p", "--param", "params", multiple=True, help="NAME=VALUE (repeatable)")
@click.option("--input", "inputs", multiple=True, help="CHANNEL=URL (repeatable)")
@click.option("--output", "outputs", multiple=True, help="CHANNEL=URL (repeatable)")
@click.option("--flavor", help="another resource flavor")
@click.option("--code-dir", help="another code directory (or s3:// URL)")
@click.option("--resume", is_flag=True, help="start from the earlier version's outputs")
@click.option("--description")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def new_version(state: Any, job_id: str, from_version: str | None, params: tuple[str, ...],
                inputs: tuple[str, ...], outputs: tuple[str, ...], flavor: str | None,
                code_dir: str | None, resume: bool, description: str | None,
                as_json: bool) -> None:
    """Start a new version of a training job with some changes."""
    def channels(values: tuple[str, ...], what: str) -> list[dict[str, Any]]:
        return [{"name": k, "remote": {"obs": {"obs_url": _local_or_url(v)}}}
                for k, v in _pairs(values, what).items()]

    alg: dict[str, Any] = {
        "parameters": [{"name": k, "value": v} for k, v in _pairs(params, "--param").items()],
        "inputs": channels(inputs, "--input"), "outputs": channels(outputs, "--output")}
    if code_dir:
        alg["code_dir"] = _local_or_url(code_dir)
    body: dict[str, Any] = {"algorithm": alg, "resume": resume}
    if from_version:
        body["from_version"] = from_version
    if flavor:
        body["spec"] = {"resource": {"flavor_id": flavor}}
    if description is not None:
        body["description"] = description
    job = state.connect().create_version(job_id, body)
    if as_json:
        terminal.print_json(job)
        return
    meta = job["metadata"]
    state.out.print(f"started [bold]{terminal.esc(meta['name'])}[/] "
                    f"{meta.get('version', '')} as [bold]{meta['id']}[/] "
                    f"({terminal.phase_label(job.get('status', {}))})")


def _local_or_url(value: str) -> str:
    if "://" in value:
        return value
    return str(pathlib.Path(value).expanduser().absolute())


# -- training metrics -----------------------------------------------------------------------


@click.command(name="metrics")
@click.argument("job_id")
@click.option("--task", help="one task's metrics (default: every task's)")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def training_metrics(state: Any, job_id: str, task: str | None, as_json: bool) -> None:
    """Show the training metrics a job reported: each metric's last value and its count."""
    found = state.connect().training_metrics(job_id, task)
    if as_json:
        terminal.print_json(found)
        return
    table = terminal.table("METRIC", "LAST", "MIN", "MAX", "POINTS", "LAST STEP")
    for s in found.get("metrics", []):
        values = s.get("value") or []
        steps = [x for x in s.get("steps") or [] if x is not None]
        table.add_row(s["metric"], _fmt(values[-1]) if values else "-",
                      _fmt(min(values)) if values else "-", _fmt(max(values)) if values else "-",
                      str(len(values)), terminal.cell(steps[-1] if steps else None))
    state.out.print(table)


# -- models ---------------------------------------------------------------------------------


@click.group()
def models() -> None:
    """The model registry: list, show, alias, download and delete models."""


@models.command(name="list")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def list_models(state: Any, as_json: bool) -> None:
    """List the registered models."""
    found = state.connect().models()
    if as_json:
        terminal.print_json(found)
        return
    table = terminal.table("NAME", "LATEST", "VERSIONS", "ALIASES", "UPDATED")
    for m in found.get("models", []):
        aliases = ", ".join(f"{a}=v{v}" for a, v in (m.get("aliases") or {}).items())
        table.add_row(m["name"], terminal.cell(m.get("latest_version")),
                      str(m.get("version_count", 0)), aliases or "-",
                      terminal.time_ms(m.get("update_time")))
    state.out.print(table)


@models.command(name="show")
@click.argument("name")
@click.argument("version", required=False)
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def show_model(state: Any, name: str, version: str | None, as_json: bool) -> None:
    """Show a model and its versions, or one VERSION of it (a number or an alias)."""
    api = state.connect()
    if version is None:
        found = api.model(name)
        if as_json:
            terminal.print_json(found)
            return
        table = terminal.table("VERSION", "ALIASES", "FROM JOB", "JOB VERSION", "FILES",
                               "METRICS", "CREATED")
        for v in found.get("versions") or []:
            metrics = "  ".join(f"{k}={_fmt(x)}" for k, x in (v.get("metrics") or {}).items())
            table.add_row(str(v["version"]), ", ".join(v.get("aliases") or []) or "-",
                          v["source_job_id"], terminal.cell(v.get("source_version")),
                          f"{v['file_count']} ({v['size_bytes']} B)", metrics or "-",
                          terminal.time_ms(v.get("create_time")))
        state.out.print(f"[bold]{terminal.esc(found['name'])}[/] "
                        f"({found.get('version_count', 0)} version(s))")
        state.out.print(table)
        return
    v = api.model_version(name, version)
    if as_json:
        terminal.print_json(v)
        return
    grid = terminal.grid()
    for key in ("version", "aliases", "location", "file_count", "size_bytes", "source_job_id",
                "source_job_name", "source_version", "source_channel", "source_phase",
                "code_hash", "git_commit"):
        value = v.get(key)
        grid.add_row(key.replace("_", " "), terminal.esc(
            ", ".join(value) if isinstance(value, list) else terminal.cell(value)))
    for group in ("metrics", "parameters", "inputs"):
        for k, x in (v.get(group) or {}).items():
            grid.add_row(f"{group[:-1] if group != 'metrics' else 'metric'} {k}",
                         terminal.esc(_fmt(x)))
    state.out.print(f"[bold]{terminal.esc(name)}[/] version {v['version']}")
    state.out.print(grid)


@models.command(name="alias")
@click.argument("name")
@click.argument("alias")
@click.argument("version", type=int, required=False)
@click.option("--delete", "remove", is_flag=True, help="remove the alias instead")
@click.pass_obj
def alias_model(state: Any, name: str, alias: str, version: int | None, remove: bool) -> None:
    """Point ALIAS (production, candidate, ...) of model NAME at VERSION."""
    api = state.connect()
    if remove:
        api.delete_alias(name, alias)
        state.out.print(f"removed alias {alias} of {name}")
        return
    if version is None:
        raise terminal.Failure("give the VERSION the alias should name (or --delete)")
    api.set_alias(name, alias, version)
    state.out.print(f"{name}: {alias} -> version {version}")


@models.command(name="register")
@click.argument("name")
@click.argument("job_id")
@click.option("--channel", help="the output channel (default: the job's model channel)")
@click.pass_obj
def register_model(state: Any, name: str, job_id: str, channel: str | None) -> None:
    """Register the outputs of an ended job JOB_ID as a new version of model NAME."""
    v = state.connect().register_model(name, job_id, channel)
    state.out.print(f"registered {name} version {v['version']} from {job_id}")


@models.command(name="delete")
@click.argument("name")
@click.argument("version", required=False)
@click.pass_obj
def delete_model(state: Any, name: str, version: str | None) -> None:
    """Delete model NAME (every version), or one VERSION of it, with the files."""
    state.connect().delete_model(name, version)
    state.out.print(f"deleted {name}" + (f" version {version}" if version else ""))


@models.command(name="download")
@click.argument("name")
@click.argument("version", default="latest")
@click.option("-o", "--output", type=click.Path(path_type=pathlib.Path),
              help="file to write (default: NAME-vVERSION.tar.gz; '-' for stdout)")
@click.pass_obj
def download_model(state: Any, name: str, version: str, output: pathlib.Path | None) -> None:
    """Download a model VERSION (number, alias or latest) as one .tar.gz archive."""
    api = state.connect()
    if output is not None and str(output) == "-":
        api.download_model(name, version, sys.stdout.buffer)
        return
    if output is None:
        number = api.model_version(name, version)["version"]
        output = pathlib.Path(f"{name}-v{number}.tar.gz")
    tmp = output.with_name(f".{output.name}.part")
    try:
        with tmp.open("wb") as fh:
            size = api.download_model(name, version, fh)
        tmp.replace(output)
    finally:
        tmp.unlink(missing_ok=True)
    state.out.print(f"wrote {output} ({size} bytes)")
