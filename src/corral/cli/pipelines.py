"""`corral pipeline ...`: DAGs of training jobs (submit, list, show, stop, rerun, clean,
delete, events).

A PIPELINE here is an id, or a name one live pipeline of the project has. A pipeline file
is read as `corral submit` reads a job file: JSON or YAML, a key it does not know refused
with the key likely meant, its tasks' relative paths taken from the file's folder.
"""

from __future__ import annotations

import os
import pathlib
import time
from typing import TYPE_CHECKING, Any

import click
import rich.tree
import yaml

from corral.cli import jobfile, render
from corral.domain.pipelines import spec, status
from corral.sdk import client

if TYPE_CHECKING:
    from corral.cli.state import State

STATES = [s.value for s in status.Status]
_STYLE = {"success": "green", "cached": "green", "running": "cyan", "waiting": "dim",
          "failed": "red", "upstream_failed": "red", "timeout": "red", "canceled": "yellow",
          "skipped": "dim"}


@click.group(short_help="DAGs of training jobs.")
def pipeline() -> None:
    """Pipelines: tasks with dependencies, each an ordinary training job."""


def load_pipeline_file(file: pathlib.Path) -> dict[str, Any]:
    """The pipeline body in `file`, its unknown keys refused, its relative paths made
    absolute."""
    try:
        body = yaml.safe_load(file.read_text(encoding="utf-8"))  # (JSON is YAML too)
    except FileNotFoundError:
        raise render.Failure(f"{file}: no such file") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise render.Failure(f"{file}: cannot read it: {render.one_line(exc)}") from None
    except RecursionError:
        raise jobfile.too_deep(file) from None
    if not isinstance(body, dict):
        raise render.Failure(f"{file}: expected a mapping (a pipeline: metadata, tasks)")
    unknown = jobfile.unknown_keys(body, spec.PipelineCreate)
    if unknown:
        raise render.Failure(f"{file}: unknown key{'s' if len(unknown) > 1 else ''} "
                             f"{'; '.join(unknown)}")
    base = file.absolute().parent
    for task in body.get("tasks") or []:
        if isinstance(task, dict) and isinstance(task.get("algorithm"), dict):
            job = jobfile.resolve_paths({"algorithm": task["algorithm"],
                                         "spec": task.get("spec") or {}}, base)
            task["algorithm"] = job["algorithm"]
            if "spec" in task:
                task["spec"] = job["spec"]
    root = body.get("output_root")
    if isinstance(root, str) and root and "://" not in root and not os.path.isabs(root):
        body["output_root"] = os.path.normpath(base / pathlib.Path(root).expanduser())
    return body


def pipeline_id(api: client.Client, ref: str) -> str:
    """The id of the pipeline `ref` names (an id, or the name of a live one)."""
    found = api.pipelines(name=ref, limit=2).get("items") or []
    return str(found[0]["id"]) if len(found) == 1 else ref


@pipeline.command(short_help="Submit a pipeline described in a file.")
@click.argument("file", type=click.Path(path_type=pathlib.Path))
@click.option("--watch", is_flag=True,
              help="follow it until it ends; exit with 1 unless it succeeded")
@render.json_option("print the created pipeline as JSON")
@click.pass_obj
def submit(state: State, file: pathlib.Path, watch: bool, as_json: bool) -> None:
    """Submit the pipeline described by FILE (JSON or YAML; docs/pipelines.md)."""
    api = state.connect()
    found = api.create_pipeline(load_pipeline_file(file))
    if as_json and not watch:
        render.print_json(found)
        return
    state.out.print(f"submitted pipeline [bold]{render.esc(found['name'])}[/] as "
                    f"[bold]{found['id']}[/] ({len(found['tasks'])} task run(s))")
    if watch:
        _watch(state, api, found["id"])
    else:
        state.out.print(f"[dim]follow it with: corral pipeline show {found['id']}[/]")


def _watch(state: State, api: client.Client, ident: str, poll: float = 0.5) -> None:
    """Print each run's changes until the pipeline ends; then its tree."""
    seen: dict[str, str] = {}
    try:
        while True:
            found = api.pipeline(ident)
            for run in found["tasks"]:
                if seen.get(run["key"]) != run["state"]:
                    seen[run["key"]] = run["state"]
                    job = f"  job {run['job_id']}" if run.get("job_id") else ""
                    origin = f"  [dim]({run['origin']})[/]" if run["origin"] != "run" else ""
                    state.out.print(f"{render.time_ms(int(time.time() * 1000))}  "
                                    f"{run['key']:<20} {_state(run['state'])}{job}{origin}")
            if found["status"]["state"] != status.Status.RUNNING:
                break
            time.sleep(poll)
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    state.out.print(tree(found))
    if found["status"]["state"] != status.Status.SUCCESS:
        raise render.Failure(f"pipeline {found['name']} ended {found['status']['state']}"
                             + (f": {found['status']['message']}"
                                if found["status"].get("message") else ""))


@pipeline.command(name="list", short_help="List pipelines, newest first.")
@click.option("--state", "states", multiple=True, type=click.Choice(STATES),
              help="only pipelines in this state (repeatable)")
@click.option("--limit", type=click.IntRange(1, 100), default=20, show_default=True)
@render.json_option()
@click.pass_obj
def list_pipelines(state: State, states: tuple[str, ...], limit: int, as_json: bool) -> None:
    """List pipelines, newest first, with their progress."""
    found = state.connect().pipelines(states=states, limit=limit)
    if as_json:
        render.print_json(found)
        return
    table = render.table("ID", "NAME", "STATE", "PROGRESS", "ATTEMPT", "CREATED", "DURATION")
    for p in found.get("items", []):
        st = p["status"]
        table.add_row(p["id"], render.esc(p["name"]), _state(st["state"]),
                      f"{st['progress']}%", str(st["attempt"]),
                      render.time_ms(p.get("create_time")), render.duration(st.get("duration")))
    state.out.print(table)
    state.out.print(f"[dim]{len(found.get('items', []))} of {found.get('total', 0)} "
                    "pipelines[/]")


@pipeline.command(short_help="Show a pipeline's graph, with each task's state.")
@click.argument("pipeline_ref", metavar="PIPELINE")
@render.json_option()
@click.pass_obj
def show(state: State, pipeline_ref: str, as_json: bool) -> None:
    """Show a pipeline as a tree of its tasks, each with its state, duration and job id,
    and its progress."""
    api = state.connect()
    found = api.pipeline(pipeline_id(api, pipeline_ref))
    if as_json:
        render.print_json(found)
        return
    state.out.print(tree(found))
    if found.get("model"):
        m = found["model"]
        state.out.print(f"model: [bold]{render.esc(m['name'])}[/] version {m['version']}")


def tree(found: dict[str, Any]) -> rich.tree.Tree:
    """The pipeline's graph as a tree: each task under the first task it depends on."""
    st = found["status"]
    message = f"  [dim]{render.esc(st['message'])}[/]" if st.get("message") else ""
    root = rich.tree.Tree(
        f"[bold]{render.esc(found['name'])}[/] {_state(st['state'])} {st['progress']}%  "
        f"attempt {st['attempt']}  {render.duration(st.get('duration'))}{message}")
    runs: dict[str, list[dict[str, Any]]] = {}
    for run in found["tasks"]:
        runs.setdefault(run["task"], []).append(run)
    nodes: dict[str, rich.tree.Tree] = {}
    for task in found["dag"]:
        deps = task["depends_on"]
        parent = nodes.get(deps[0], root) if deps else root
        others = f"  [dim]after {', '.join(deps)}[/]" if len(deps) > 1 else ""
        mine = runs.get(task["name"], [])
        if task["items"] is None and mine:
            nodes[task["name"]] = parent.add(_run_label(mine[0]) + others)
            continue
        cap = f", at most {task['parallelism']} at once" if task.get("parallelism") else ""
        node = parent.add(f"[bold]{task['name']}[/]  [dim]{task['items']} items{cap}[/]"
                          + others)
        for run in mine:
            node.add(_run_label(run))
        nodes[task["name"]] = node
    return root


def _run_label(run: dict[str, Any]) -> str:
    parts = [f"[bold]{run['key']}[/]", _state(run["state"])]
    if run.get("duration"):
        parts.append(render.duration(run["duration"]))
    if run.get("job_id"):
        parts.append(f"job {run['job_id']}")
    if run.get("origin") != "run":
        parts.append(f"[dim]({run['origin']})[/]")
    if run.get("message"):
        parts.append(f"[dim]{render.esc(run['message'])}[/]")
    return "  ".join(parts)


def _state(value: str) -> str:
    return f"[{_STYLE.get(value, 'white')}]{value}[/]"


@pipeline.command(short_help="Stop a running pipeline.")
@click.argument("pipeline_ref", metavar="PIPELINE")
@click.pass_obj
def stop(state: State, pipeline_ref: str) -> None:
    """Stop a pipeline: its running tasks are stopped, its waiting ones canceled."""
    api = state.connect()
    found = api.pipeline_action(pipeline_id(api, pipeline_ref), "stop")
    state.out.print(f"stopping pipeline {found['name']} ({found['id']})")


@pipeline.command(short_help="Run an ended pipeline again, from where it failed.")
@click.argument("pipeline_ref", metavar="PIPELINE")
@click.option("--from-failed", "mode", flag_value="from_failed", default=True,
              help="run again what did not succeed (the default)")
@click.option("--from", "from_task", metavar="TASK",
              help="run again TASK and everything downstream of it")
@click.option("--all", "mode", flag_value="all", help="run everything again")
@click.option("-p", "--param", "params", multiple=True, metavar="NAME=VALUE",
              help="a pipeline parameter, or TASK.NAME=VALUE for a task's own (repeatable)")
@click.option("--watch", is_flag=True, help="follow it until it ends")
@click.pass_obj
def rerun(state: State, pipeline_ref: str, mode: str, from_task: str | None,
          params: tuple[str, ...], watch: bool) -> None:
    """Run an ended pipeline again as a new attempt; the runs it does not run again keep
    their outputs, which feed the ones it does."""
    values = {}
    for item in params:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise click.BadParameter(f"'{item}' is not NAME=VALUE", param_hint="-p")
        values[name] = value
    if from_task is not None and mode == "all":
        raise click.UsageError("give --from TASK or --all, not both")
    api = state.connect()
    ident = pipeline_id(api, pipeline_ref)
    found = api.pipeline_action(ident, "rerun", mode="from_task" if from_task else mode,
                                from_task=from_task, parameters=values)
    state.out.print(f"pipeline {found['name']}: attempt {found['status']['attempt']} started")
    if watch:
        _watch(state, api, ident)


@pipeline.command(short_help="Remove a pipeline's intermediate outputs.")
@click.argument("pipeline_ref", metavar="PIPELINE")
@render.json_option()
@click.pass_obj
def clean(state: State, pipeline_ref: str, as_json: bool) -> None:
    """Remove an ended pipeline's intermediate outputs (all but its saved model's)."""
    api = state.connect()
    _print_cleanup(state, api.clean_pipeline(pipeline_id(api, pipeline_ref)), as_json)


@pipeline.command(short_help="Delete a pipeline, its jobs and intermediate outputs.")
@click.argument("pipeline_ref", metavar="PIPELINE")
@render.json_option()
@click.pass_obj
def delete(state: State, pipeline_ref: str, as_json: bool) -> None:
    """Delete a pipeline, its jobs and its intermediate outputs; a running one is stopped
    first."""
    api = state.connect()
    found = api.delete_pipeline(pipeline_id(api, pipeline_ref))
    if found.get("deferred") and not as_json:
        state.out.print("stopping it; its outputs are removed once its tasks have stopped")
        return
    _print_cleanup(state, found, as_json)


def _print_cleanup(state: State, found: dict[str, Any], as_json: bool) -> None:
    if as_json:
        render.print_json(found)
        return
    for path in found.get("removed", []):
        state.out.print(f"removed {render.esc(path)}")
    for kept in found.get("kept", []):
        state.out.print(f"[dim]kept {render.esc(kept['path'])} ({render.esc(kept['why'])})[/]")
    state.out.print(f"{len(found.get('removed', []))} output folder(s) removed")


@pipeline.command(short_help="Show a pipeline's events, oldest first.")
@click.argument("pipeline_ref", metavar="PIPELINE")
@render.json_option()
@click.pass_obj
def events(state: State, pipeline_ref: str, as_json: bool) -> None:
    """Show a pipeline's events: its tasks started and ended, stops, reruns, cleaning."""
    api = state.connect()
    found = api.pipeline_events(pipeline_id(api, pipeline_ref), limit=1000)
    if as_json:
        render.print_json(found)
        return
    table = render.table("TIME", "LEVEL", "MESSAGE")
    for e in found.get("events", []):
        table.add_row(render.time_any(e.get("time")), render.cell(e.get("level")),
                      render.esc(render.cell(e.get("message"))))
    state.out.print(table)


COMMANDS = (pipeline,)
