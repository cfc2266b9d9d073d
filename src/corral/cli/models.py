"""`corral versions`, `diff`, `new-version`, `metrics` and `models ...`: job versions, the
metrics jobs report, and the model registry.

A JOB here is an id or a name; the versions of a job share its name, which `versions`,
`diff` and `new-version` take as the newest version (`State.job_id`).
"""

from __future__ import annotations

import pathlib
import sys
from typing import TYPE_CHECKING, Any

import click
import rich.table

from corral.cli import render

if TYPE_CHECKING:
    from corral.cli.state import State


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return render.cell(value)


def _short(text: Any, n: int = 19) -> str:
    return render.cell(text)[:n] if text else "-"


# -- versions -------------------------------------------------------------------------------


@click.command(short_help="List the versions of a training job.")
@click.argument("job")
@render.json_option()
@click.pass_obj
def versions(state: State, job: str, as_json: bool) -> None:
    """List the versions of a training job (JOB: any of its versions, or their name)."""
    found = state.connect().versions(state.job_id(job, family=True))
    if as_json:
        render.print_json(found)
        return
    table = render.table("VERSION", "ID", "FROM", "PHASE", "DURATION", "CODE", "FINAL METRICS")
    for v in found.get("versions", []):
        final = "  ".join(f"{k}={_fmt(x)}" for k, x in (v.get("final_metrics") or {}).items())
        source = render.cell(v.get("pre_version_name")) + (" (resumed)" if v.get("resume")
                                                              else "")
        table.add_row(v["version_name"], v["version_id"], source,
                      render.phase_label(v), render.duration(v.get("duration")),
                      _short(v.get("code_hash")), final or "-")
    state.out.print(f"[bold]{render.esc(found.get('job_name', ''))}[/] "
                    f"({found.get('version_count', 0)} version(s))")
    state.out.print(table)


def _diff_rows(a: dict[str, Any], b: dict[str, Any]) -> list[tuple[str, str, str]]:
    rows = []
    for key in ("phase", "flavor_id", "node_count", "code_dir", "boot_file", "command",
                "code_hash", "git_commit", "pre_version_name", "resume"):
        rows.append((key.replace("_", " "), _fmt(a.get(key)), _fmt(b.get(key))))
    rows.append(("duration", render.duration(a.get("duration")),
                 render.duration(b.get("duration"))))
    for group, label in (("parameters", "--"), ("inputs", "input "), ("outputs", "output "),
                         ("final_metrics", "metric ")):
        left, right = a.get(group) or {}, b.get(group) or {}
        for name in sorted(set(left) | set(right)):
            rows.append((f"{label}{name}", _fmt(left.get(name)), _fmt(right.get(name))))
    return rows


@click.command(short_help="Show what differs between two versions.")
@click.argument("job")
@click.argument("left")
@click.argument("right")
@click.option("--all", "show_all", is_flag=True, help="also show what did not change")
@render.json_option()
@click.pass_obj
def diff(state: State, job: str, left: str, right: str, show_all: bool, as_json: bool) -> None:
    """Show what differs between versions LEFT and RIGHT (V0001, 2, ...) of JOB."""
    api = state.connect()
    job_id = state.job_id(job, family=True)
    a, b = api.version(job_id, left), api.version(job_id, right)
    rows = _diff_rows(a, b)
    changed = [r for r in rows if r[1] != r[2]]
    if as_json:
        render.print_json({"left": a, "right": b,
                             "changed": {name: {"left": x, "right": y}
                                         for name, x, y in changed}})
        return
    table = render.table("", a["version_name"], b["version_name"])
    for name, x, y in rows if show_all else changed:
        style = "bold yellow" if x != y else "dim"
        table.add_row(name, f"[{style}]{render.esc(x)}[/]", f"[{style}]{render.esc(y)}[/]")
    state.out.print(table)
    if not changed:
        state.out.print("[dim]no differences[/]")


def _pairs(values: tuple[str, ...], what: str) -> dict[str, str]:
    out = {}
    for item in values:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise click.BadParameter(f"'{item}' is not NAME=VALUE", param_hint=what)
        out[name] = value
    return out


@click.command(name="new-version", short_help="Start a new version of a training job.")
@click.argument("job")
@click.option("--from", "from_version", help="version to start from (default: JOB's)")
@click.option("-p", "--param", "params", multiple=True, help="NAME=VALUE (repeatable)")
@click.option("--input", "inputs", multiple=True, help="CHANNEL=URL (repeatable)")
@click.option("--output", "outputs", multiple=True, help="CHANNEL=URL (repeatable)")
@click.option("--flavor", help="another resource flavor")
@click.option("--code-dir", help="another code directory (or s3:// URL)")
@click.option("--resume", is_flag=True, help="start from the earlier version's outputs")
@click.option("--description", help="the new version's description")
@render.json_option()
@click.pass_obj
def new_version(state: State, job: str, from_version: str | None, params: tuple[str, ...],
                inputs: tuple[str, ...], outputs: tuple[str, ...], flavor: str | None,
                code_dir: str | None, resume: bool, description: str | None,
                as_json: bool) -> None:
    """Start a new version of JOB with some changes: parameters, data, flavor or code.
    Given a name, JOB is its newest version."""
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
    made = state.connect().create_version(state.job_id(job, family=True), body)
    if as_json:
        render.print_json(made)
        return
    meta = made["metadata"]
    state.out.print(f"started [bold]{render.esc(meta['name'])}[/] "
                    f"{meta.get('version', '')} as [bold]{meta['id']}[/] "
                    f"({render.phase_label(made.get('status', {}))})")


def _local_or_url(value: str) -> str:
    if "://" in value:
        return value
    return str(pathlib.Path(value).expanduser().absolute())


# -- training metrics -----------------------------------------------------------------------


@click.command(name="metrics", short_help="Show the training metrics a job reported.")
@click.argument("job")
@click.option("--task", help="one task's metrics (default: every task's)")
@render.json_option()
@click.pass_obj
def training_metrics(state: State, job: str, task: str | None, as_json: bool) -> None:
    """Show the training metrics a job reported: each metric's last, lowest and highest
    value, and how many points it has."""
    found = state.connect().training_metrics(state.job_id(job), task)
    if as_json:
        render.print_json(found)
        return
    table = render.table("METRIC", "LAST", "MIN", "MAX", "POINTS", "LAST STEP")
    for s in found.get("metrics", []):
        values = s.get("value") or []
        steps = [x for x in s.get("steps") or [] if x is not None]
        table.add_row(s["metric"], _fmt(values[-1]) if values else "-",
                      _fmt(min(values)) if values else "-", _fmt(max(values)) if values else "-",
                      str(len(values)), render.cell(steps[-1] if steps else None))
    state.out.print(table)


# -- models ---------------------------------------------------------------------------------


@click.group(short_help="The model registry.")
def models() -> None:
    """The model registry: list, show, alias, download and delete models."""


@models.command(name="list", short_help="List the registered models.")
@render.json_option()
@click.pass_obj
def list_models(state: State, as_json: bool) -> None:
    """List the registered models."""
    found = state.connect().models()
    if as_json:
        render.print_json(found)
        return
    table = render.table("NAME", "LATEST", "VERSIONS", "ALIASES", "UPDATED")
    for m in found.get("models", []):
        aliases = ", ".join(f"{a}=v{v}" for a, v in (m.get("aliases") or {}).items())
        table.add_row(m["name"], render.cell(m.get("latest_version")),
                      str(m.get("version_count", 0)), aliases or "-",
                      render.time_ms(m.get("update_time")))
    state.out.print(table)


@models.command(name="show", short_help="Show a model, or one version of it.")
@click.argument("name")
@click.argument("version", required=False)
@render.json_option()
@click.pass_obj
def show_model(state: State, name: str, version: str | None, as_json: bool) -> None:
    """Show a model and its versions, or one VERSION of it (a number, an alias or latest)."""
    api = state.connect()
    found = api.model(name) if version is None else api.model_version(name, version)
    if as_json:
        render.print_json(found)
    elif version is None:
        state.out.print(f"[bold]{render.esc(found['name'])}[/] "
                        f"({found.get('version_count', 0)} version(s))")
        state.out.print(_model_versions(found.get("versions") or []))
    else:
        state.out.print(f"[bold]{render.esc(name)}[/] version {found['version']}")
        state.out.print(_model_version(found))


def _model_versions(versions: list[dict[str, Any]]) -> rich.table.Table:
    table = render.table("VERSION", "ALIASES", "FROM JOB", "JOB VERSION", "FILES", "METRICS",
                         "CREATED")
    for v in versions:
        metrics = "  ".join(f"{k}={_fmt(x)}" for k, x in (v.get("metrics") or {}).items())
        table.add_row(str(v["version"]), ", ".join(v.get("aliases") or []) or "-",
                      v["source_job_id"], render.cell(v.get("source_version")),
                      f"{v['file_count']} ({v['size_bytes']} B)", metrics or "-",
                      render.time_ms(v.get("create_time")))
    return table


def _model_version(v: dict[str, Any]) -> rich.table.Table:
    grid = render.grid()
    for key in ("version", "aliases", "location", "file_count", "size_bytes", "source_job_id",
                "source_job_name", "source_version", "source_channel", "source_phase",
                "code_hash", "git_commit"):
        value = v.get(key)
        grid.add_row(key.replace("_", " "), render.esc(
            ", ".join(value) if isinstance(value, list) else render.cell(value)))
    for group in ("metrics", "parameters", "inputs"):
        for k, x in (v.get(group) or {}).items():
            grid.add_row(f"{group[:-1] if group != 'metrics' else 'metric'} {k}",
                         render.esc(_fmt(x)))
    for d in v.get("datasets") or []:  # the lineage: job -> dataset version -> this
        grid.add_row(f"dataset read ({d['channel']})", render.esc(
            f"{d.get('dataset_name')} {d.get('version_name')} ({d.get('version_id')}, "
            f"{d.get('content_hash') or 'version gone'})"))
    return grid


@models.command(name="alias", short_help="Point an alias of a model at a version.")
@click.argument("name")
@click.argument("alias")
@click.argument("version", type=int, required=False)
@click.option("--delete", "remove", is_flag=True, help="remove the alias instead")
@click.pass_obj
def alias_model(state: State, name: str, alias: str, version: int | None, remove: bool) -> None:
    """Point ALIAS (production, candidate, ...) of model NAME at VERSION."""
    api = state.connect()
    if remove:
        api.delete_alias(name, alias)
        state.out.print(f"removed alias {alias} of {name}")
        return
    if version is None:
        raise click.UsageError("give the VERSION the alias should name (or --delete)")
    api.set_alias(name, alias, version)
    state.out.print(f"{name}: {alias} -> version {version}")


@models.command(name="register", short_help="Register a job's outputs as a model version.")
@click.argument("name")
@click.argument("job")
@click.option("--channel", help="the output channel (default: the job's model channel)")
@click.pass_obj
def register_model(state: State, name: str, job: str, channel: str | None) -> None:
    """Register the outputs of an ended JOB as a new version of model NAME."""
    job_id = state.job_id(job)
    v = state.connect().register_model(name, job_id, channel)
    state.out.print(f"registered {name} version {v['version']} from {job_id}")


@models.command(name="delete", short_help="Delete a model, or one version of it.")
@click.argument("name")
@click.argument("version", required=False)
@click.pass_obj
def delete_model(state: State, name: str, version: str | None) -> None:
    """Delete model NAME (every version), or one VERSION of it, with the files."""
    state.connect().delete_model(name, version)
    state.out.print(f"deleted {name}" + (f" version {version}" if version else ""))


@models.command(name="download", short_help="Download a model version as a .tar.gz.")
@click.argument("name")
@click.argument("version", default="latest")
@click.option("-o", "--output", type=click.Path(path_type=pathlib.Path),
              help="file to write (default: NAME-vVERSION.tar.gz; '-' for stdout)")
@click.pass_obj
def download_model(state: State, name: str, version: str, output: pathlib.Path | None) -> None:
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


COMMANDS = (versions, diff, new_version, training_metrics, models)
