"""`corral il ...`: incremental-learning jobs (Sedna's IncrementalLearningJob).

A loop is made from a file holding Sedna's body (YAML or JSON); its templates are job
bodies, whose relative paths are taken from the file's folder as `corral submit` does,
and whose keys are checked as `corral submit` checks a job file's. LOOP is a loop's name
or id.
"""

from __future__ import annotations

import pathlib
from typing import TYPE_CHECKING, Any

import click
import yaml

from corral.cli import jobfile, render
from corral.domain import specs
from corral.domain.incremental import loopspec
from corral.sdk import incremental

if TYPE_CHECKING:
    from corral.cli.state import State

TEMPLATES = (("trainSpec",), ("evalSpec",), ("deploySpec",))


@click.group(name="il", short_help="Incremental-learning jobs: retrain as data arrives.")
def il() -> None:
    """Incremental-learning jobs: a loop that retrains a model when enough new samples
    arrive in a dataset, evaluates it against the current one, and promotes and hot-reloads
    it when it wins (docs/incremental-learning.md)."""


def load(file: pathlib.Path) -> dict[str, Any]:
    """The loop's body in `file`, its local paths made absolute and its templates' keys
    checked."""
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise render.Failure(f"{file}: cannot read it: {render.one_line(exc)}") from None
    try:
        body = yaml.safe_load(text)  # (YAML reads JSON too)
    except yaml.YAMLError as exc:
        raise render.Failure(f"{file}: not valid YAML or JSON: {render.one_line(exc)}"
                             ) from None
    except RecursionError:
        raise jobfile.too_deep(file) from None
    if not isinstance(body, dict) or not isinstance(body.get("spec"), dict):
        raise render.Failure(f"{file}: expected an IncrementalLearningJob (metadata, spec)")
    base = file.absolute().parent
    spec = body["spec"]
    for (key,) in TEMPLATES:
        part = spec.get(key)
        template = part.get("template") if isinstance(part, dict) else None
        if isinstance(template, dict):
            unknown = jobfile.unknown_keys(_less_node(template), specs.JobCreate)
            if unknown:
                raise render.Failure(f"{file}: spec.{key}.template: unknown key(s) "
                                     f"{'; '.join(unknown)}")
            part["template"] = jobfile.resolve_paths(template, base)
    out = spec.get("outputDir")
    if isinstance(out, str) and out and "://" not in out:
        spec["outputDir"] = str((base / pathlib.Path(out).expanduser()).resolve())
    return body


def _less_node(template: dict[str, Any]) -> dict[str, Any]:
    """A template without Sedna's `spec.nodeName` (the loop's key, not a job body's)."""
    spec = template.get("spec")
    if not isinstance(spec, dict) or loopspec.NODE_NAME not in spec:
        return template
    return {**template, "spec": {k: v for k, v in spec.items() if k != loopspec.NODE_NAME}}


@il.command(name="create", short_help="Make an incremental-learning job from a file.")
@click.option("-f", "--file", "file", required=True,
              type=click.Path(path_type=pathlib.Path), help="Sedna's body, YAML or JSON")
@render.json_option()
@click.pass_obj
def create_loop(state: State, file: pathlib.Path, as_json: bool) -> None:
    made = incremental.create(state.connect(), load(file))
    if as_json:
        render.print_json(made)
        return
    meta = made["metadata"]
    state.out.print(f"created [bold]{render.esc(meta['name'])}[/] ({meta['id']}): "
                    f"{made['status']['state']}")
    state.out.print(f"[dim]follow it with: corral il show {meta['name']}[/]")


@il.command(name="list", short_help="List the project's incremental-learning jobs.")
@render.json_option()
@click.pass_obj
def list_loops(state: State, as_json: bool) -> None:
    found = incremental.loops(state.connect())
    if as_json:
        render.print_json(found)
        return
    table = render.table("NAME", "STATE", "ROUNDS", "NEW SAMPLES", "MODEL", "SERVICE")
    for item in found.get("items", []):
        st = item["status"]
        model = st["model"]
        serving = f"{model['name']}:{model['alias']}=" + (f"v{model['version']}"
                                                          if model["version"] else "-")
        service = st.get("service") or {}
        table.add_row(item["metadata"]["name"], st["state"], str(st["rounds_started"]),
                      str(st["num_of_samples"]), serving, service.get("phase") or "-")
    state.out.print(table)


def _metrics(r: dict[str, Any]) -> str:
    new, cur = r["metrics"]["new"], r["metrics"]["current"]
    parts = []
    for name in sorted(set(new) | set(cur)):
        a, b = new.get(name), cur.get(name)
        parts.append(f"{name} {_num(a)} vs {_num(b)}")
    return "; ".join(parts) or "-"


def _num(x: Any) -> str:
    return f"{x:.4g}" if isinstance(x, int | float) else "-"


def _trigger(t: dict[str, Any]) -> str:
    if t.get("manual"):
        return f"by {t.get('by') or 'a user'} ({t.get('num_of_samples', 0)} samples)"
    return f"{t.get('num_of_samples', 0)} samples"


def _deploy(d: dict[str, Any] | None) -> str:
    if not d:
        return "-"
    return f"{d['model']} {d['state']}" + (f": {d['message']}" if d.get("message") and
                                          d["state"] != "Loaded" else "")


def rounds_table(rounds: list[dict[str, Any]]) -> Any:
    table = render.table("ROUND", "TRIGGER", "TRAIN JOB", "EVAL JOB", "NEW", "METRICS (NEW VS "
                         "CURRENT)", "VERDICT", "DEPLOY")
    for r in rounds:
        verdict = r["state"] + (f" ({r['rule']})" if r.get("rule") else "") + (
            f": {r['message']}" if r.get("message") else "")
        table.add_row(str(r["number"]), _trigger(r["trigger"]),
                      render.cell(r.get("train_job_name")), render.cell(r.get("eval_job_name")),
                      f"v{r['new_version']}" if r.get("new_version") else "-",
                      render.esc(_metrics(r)), render.esc(verdict),
                      render.esc(_deploy(r.get("deploy"))))
    return table


@il.command(name="show", short_help="Show a loop and its rounds.")
@click.argument("loop")
@render.json_option()
@click.pass_obj
def show_loop(state: State, loop: str, as_json: bool) -> None:
    """Show LOOP: where it stands, its conditions, and a table of its rounds."""
    found = incremental.loop(state.connect(), loop)
    if as_json:
        render.print_json(found)
        return
    st, meta = found["status"], found["metadata"]
    model, service = st["model"], st.get("service") or {}
    state.out.print(f"[bold]{render.esc(meta['name'])}[/] ({meta['id']}): {st['state']}"
                    + (f" ({render.esc(st['message'])})" if st.get("message") else ""))
    grid = render.grid()
    grid.add_row("dataset", f"{st['dataset']['name']}: {st['dataset']['number_of_samples']} "
                 f"samples, {st['num_of_samples']} new for training, {st['eval_samples']} "
                 f"to evaluate on")
    grid.add_row("model", f"{model['name']}:{model['alias']} = "
                 + (f"v{model['version']}" if model["version"] else f"{model['initial']} "
                    "(the initial model)"))
    grid.add_row("service", f"{service.get('job_name')} ({service.get('phase')})"
                 if service else "-")
    for c in st.get("conditions", []):
        grid.add_row(f"{c['stage']}", f"{c['type']}" + (f": {render.esc(c['message'])}"
                                                        if c.get("message") else ""))
    state.out.print(grid)
    if st.get("rounds"):
        state.out.print(rounds_table(st["rounds"]))


def _act(action: str, short: str) -> click.Command:
    @click.command(name=action, short_help=short)
    @click.argument("loop")
    @click.pass_obj
    def command(state: State, loop: str) -> None:
        found = incremental.act(state.connect(), loop, action)
        state.out.print(f"{found['metadata']['name']}: {found['status']['state']}")
    command.__doc__ = f"{short} (LOOP: a name or an id)"
    return command


for _action, _short in (("trigger", "Start a round now, whatever the trigger says."),
                        ("stop", "Stop a loop: its round, its jobs, its service."),
                        ("resume", "Set a stopped or failed loop going again.")):
    il.add_command(_act(_action, _short))


@il.command(name="promote", short_help="Deploy a model and move the alias to it, by hand.")
@click.argument("loop")
@click.option("--reason", required=True, help="why (kept in the alias's history)")
@click.option("--version", type=int, help="the version (default: the latest round's)")
@click.pass_obj
def promote(state: State, loop: str, reason: str, version: int | None) -> None:
    """Deploy a version of LOOP's model and move its alias to it once the service loaded
    it: a forced promotion, recorded with REASON."""
    found = incremental.act(state.connect(), loop, "promote", reason=reason, version=version)
    state.out.print(f"{found['metadata']['name']}: {found['status']['state']}")


@il.command(name="rollback", short_help="Move the alias back to the version before.")
@click.argument("loop")
@click.option("--reason", default="", help="why (kept in the alias's history)")
@click.pass_obj
def rollback(state: State, loop: str, reason: str) -> None:
    """Deploy the version LOOP's alias named before its last move, and move it back."""
    found = incremental.act(state.connect(), loop, "rollback", reason=reason)
    state.out.print(f"{found['metadata']['name']}: {found['status']['state']}")


@il.command(name="events", short_help="Show a loop's events.")
@click.argument("loop")
@render.json_option()
@click.pass_obj
def loop_events(state: State, loop: str, as_json: bool) -> None:
    found = incremental.events(state.connect(), loop)
    if as_json:
        render.print_json(found)
        return
    table = render.table("TIME", "LEVEL", "MESSAGE")
    for e in found.get("events", []):
        table.add_row(render.time_any(e["time"]), e["level"], render.esc(e["message"]))
    state.out.print(table)


@il.command(name="delete", short_help="Delete a loop and its jobs (models stay).")
@click.argument("loop")
@click.pass_obj
def delete_loop(state: State, loop: str) -> None:
    incremental.delete(state.connect(), loop)
    state.out.print(f"deleted {loop}; its models and files stay")


COMMANDS = (il,)
