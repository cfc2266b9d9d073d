"""`corral submit`, `jobs`, `show`, `logs`, `events`, `stop` and `delete`: training jobs.

Every command here that takes a JOB takes its id or its name (`State.job_id`).
"""

from __future__ import annotations

import json
import pathlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import click
import rich.table

from corral.cli import jobfile, render
from corral.domain import jobs
from corral.sdk import algorithms, client

if TYPE_CHECKING:
    from corral.cli.state import State

PHASES = [p.value for p in jobs.Phase]
#: the phase after which `logs -f` exits with 0
COMPLETED = jobs.Phase.COMPLETED.value


@click.command(short_help="Submit a training job described in a file.")
@click.argument("file", type=click.Path(path_type=pathlib.Path))
@click.option("--algorithm", "algorithm", metavar="NAME",
              help="make the job of this saved algorithm (its name or id): its code, "
                   "engine and parameters' defaults; FILE gives the rest")
@render.json_option("print the created job as JSON")
@click.pass_obj
def submit(state: State, file: pathlib.Path, algorithm: str | None, as_json: bool) -> None:
    """Submit a training job described by FILE (a ModelArts create body, JSON or YAML).

    Relative local paths in it are taken from FILE's folder. A key the body has no field
    for is refused, with the key that was likely meant.
    """
    api = state.connect()
    body = jobfile.load_job_file(file)
    if algorithm is not None:
        found = algorithms.find(api, algorithm)
        alg = body.get("algorithm")
        body["algorithm"] = {**(alg if isinstance(alg, dict) else {}),
                             "id": found["metadata"]["id"]}
    job = api.create_job(body)
    if as_json:
        render.print_json(job)
        return
    meta, label = job["metadata"], render.phase_label(job.get("status", {}))
    state.out.print(
        f"submitted [bold]{render.esc(meta['name'])}[/] as [bold]{meta['id']}[/] ({label})"
    )
    state.out.print(f"[dim]follow it with: corral logs -f {meta['id']}[/]")


@click.command(name="jobs", short_help="List training jobs, newest first.")
@click.option("--phase", "phases", multiple=True,
              type=click.Choice(PHASES, case_sensitive=False),
              help="only jobs in this phase (repeatable)")
@click.option("--name", help="only jobs whose name contains this")
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True,
              help="at most this many jobs")
@render.json_option()
@click.pass_obj
def list_jobs(
    state: State, phases: tuple[str, ...], name: str | None, limit: int, as_json: bool
) -> None:
    """List training jobs, newest first, with why each waiting one waits."""
    total, items = _search(state.connect(), list(phases), name, limit)
    if as_json:
        render.print_json({"total": total, "count": len(items), "items": items})
        return
    table = render.table(
        "ID", "NAME", "PHASE", "FLAVOR", "NODES", "CREATED", "DURATION", "REASON"
    )
    for job in items:
        meta, status, res = job["metadata"], job["status"], _resource(job)
        table.add_row(
            meta["id"],
            render.esc(meta["name"]),
            render.phase_label(status),
            res.get("flavor_id") or "-",
            str(res.get("node_count", "-")),
            render.time_ms(meta.get("create_time")),
            render.duration(status.get("duration")),
            render.esc(status.get("reason") or ""),
        )
    state.out.print(table)
    state.out.print(f"[dim]{len(items)} of {total} jobs[/]")


def _search(
    api: client.Client, phases: list[str], name: str | None, limit: int
) -> tuple[int, list[dict[str, Any]]]:
    """Up to `limit` jobs, across as many pages (of at most 50) as that takes."""
    page_size = min(limit, 50)
    items: list[dict[str, Any]] = []
    total, page = 0, 0
    while len(items) < limit:
        found = api.list_jobs(phases=phases, name=name, limit=page_size, offset=page)
        total = int(found.get("total", 0))
        items.extend(found.get("items", []))
        page += 1
        if not found.get("items") or page * page_size >= total:
            break
    return total, items[:limit]


@click.command(short_help="Show one training job in full.")
@click.argument("job")
@render.json_option()
@click.pass_obj
def show(state: State, job: str, as_json: bool) -> None:
    """Show one training job: its phase and why, resources, tasks, runs, what it runs."""
    found = state.connect().get_job(state.job_id(job))
    if as_json:
        render.print_json(found)
        return
    out, meta, status = state.out, found["metadata"], found["status"]
    out.print(f"[bold]{render.esc(meta['name'])}[/] ({meta['id']})")
    out.print(_overview(found))
    if status.get("task_statuses"):
        tasks = render.table("TASK", "EXIT CODE", "MESSAGE")
        for t in status["task_statuses"]:
            tasks.add_row(t.get("task", "-"), render.cell(t.get("exit_code")),
                          render.esc(t.get("message") or ""))
        out.print(tasks)
    if status.get("running_records"):
        out.print(_records_table(status["running_records"]))


def _overview(job: dict[str, Any]) -> rich.table.Table:
    meta, status, algo = job["metadata"], job["status"], job["algorithm"]
    grid = render.grid()
    grid.add_row("phase", render.phase_label(status))
    if status.get("reason"):
        grid.add_row("reason", render.esc(status["reason"]))
    if status.get("failure_class"):
        grid.add_row("failure class", str(status["failure_class"]))
    if meta.get("version"):
        grid.add_row("version", str(meta["version"]))
    grid.add_row("created", render.time_ms(meta.get("create_time")))
    grid.add_row("started", render.time_ms(status.get("start_time")))
    grid.add_row("duration", render.duration(status.get("duration")))
    if meta.get("description"):
        grid.add_row("description", render.esc(meta["description"]))
    grid.add_row("resource", render.esc(_resource_line(job)))
    for label, value in _scheduling_rows(job):
        grid.add_row(label, render.esc(value))
    grid.add_row("tasks", ", ".join(status.get("tasks") or []) or "-")
    engine = algo.get("engine") or {}
    if engine.get("image_url"):
        grid.add_row("image", render.esc(engine["image_url"]))
    elif engine:
        grid.add_row(
            "engine",
            " ".join(filter(None, (engine.get("engine_name"), engine.get("engine_version"))))
            or "-",
        )
    for label, value in _algorithm_rows(algo):
        grid.add_row(label, render.esc(value))
    board = jobfile.dig(job, "endpoints", "tensorboard")
    if isinstance(board, dict):  # tensorboard/enable: its page, opened with the token
        token = board.get("token")
        grid.add_row("tensorboard", render.esc(f"{board['url']}?token={token}" if token
                                               else board["url"]))
    return grid


def _resource_line(job: dict[str, Any]) -> str:
    """`corral.cpu.1u x 2 node(s), each 1 CPU, 11.0 GiB`."""
    res = _resource(job)
    line = f"{res.get('flavor_id') or '-'} x {res.get('node_count', 1)} node(s)"
    info = jobfile.dig(res, "flavor_detail", "flavor_info") or {}
    each = []
    if (jobfile.dig(info, "cpu") or {}).get("core_num") is not None:
        each.append(f"{info['cpu']['core_num']} CPU")
    if memory := jobfile.dig(info, "memory"):
        each.append(render.memory_sized(memory.get("size"), memory.get("unit")))
    if (gpu := jobfile.dig(info, "gpu")) and gpu.get("unit_num"):
        each.append(f"{gpu['unit_num']} x {gpu.get('product_name') or 'GPU'}")
    each += [f"{a.get('unit_num')} {a.get('name')}" for a in info.get("accelerators") or []
             if isinstance(a, dict)]
    return f"{line}, each {', '.join(each)}" if each else line


def _scheduling_rows(job: dict[str, Any]) -> Iterator[tuple[str, str]]:
    res, status = _resource(job), job["status"]
    policy = jobfile.dig(job, "spec", "schedule_policy") or {}
    parts = [f"pool {res.get('pool_id') or '-'}", f"priority {policy.get('priority') or 1}"]
    if policy.get("preemptible"):
        parts.append("preemptible")
    if policy.get("placement"):
        parts.append(str(policy["placement"]))
    yield "scheduling", ", ".join(parts)
    queue = status.get("queue")
    if isinstance(queue, dict):
        # The place and code that `corral queue` shows in its # and WAIT columns; the
        # reason above says the why in the words `jobs` and `queue` use too.
        yield "queue", (f"#{int(queue.get('jobs_ahead') or 0) + 1} in pool "
                        f"{queue.get('pool_id')}, wait code {queue.get('wait_code')}")
    if status.get("borrowed"):
        yield "capacity", "borrowed beyond the project's quota: may be preempted"
    if status.get("preempting"):
        yield "preempting", "stopping to make room; it will be requeued"


def _algorithm_rows(algo: dict[str, Any]) -> Iterator[tuple[str, str]]:
    if algo.get("command"):
        yield "command", algo["command"]
    if algo.get("boot_file"):
        yield "code", f"{algo.get('code_dir') or '-'}  (boot file {algo['boot_file']})"
    if algo.get("parameters"):
        yield (
            "parameters",
            " ".join(f"--{p['name']}={p.get('value', '')}" for p in algo["parameters"]),
        )
    for key in ("inputs", "outputs"):
        for ch in algo.get(key) or []:
            url = (jobfile.dig(ch, "remote", "obs") or {}).get("obs_url", "?")
            dataset = jobfile.dig(ch, "remote", "dataset")
            if dataset:
                url = (f"dataset {dataset.get('name') or dataset.get('id')} version "
                       f"{dataset.get('version_name') or dataset.get('version_id')}")
            yield key[:-1], f"{ch.get('name')}: {url}"


def _records_table(records: list[dict[str, Any]]) -> rich.table.Table:
    table = render.table("#", "STARTED", "ENDED", "START", "END REASON", "TASK", "CLASS",
                         "RECOVERY")
    for i, r in enumerate(records, 1):
        table.add_row(
            str(i),
            render.time_s(r.get("start_at")),
            render.time_s(r.get("end_at")),
            render.cell(r.get("start_type")),
            render.esc(render.cell(r.get("end_reason"))),
            render.cell(r.get("end_related_task")),
            render.cell(r.get("failure_class")),
            render.cell(r.get("end_recover")),
        )
    return table


@click.command(short_help="Print a task's log, or follow it (-f).")
@click.argument("job")
@click.option("-f", "--follow", "keep_following", is_flag=True,
              help="keep printing until the job ends; exit 1 unless it Completed")
@click.option("--task", default=jobfile.FIRST_TASK, show_default=True, help="whose log")
@click.option("--attempt", type=int, help="a given run of the task (default: the latest)")
@render.json_option("print the log chunks as JSON lines")
@click.pass_obj
def logs(state: State, job: str, keep_following: bool, task: str, attempt: int | None,
         as_json: bool) -> None:
    """Print a task's log. With -f, keep printing it until the job ends, then say how it
    ended on stderr and exit with 1 unless it Completed (so `corral logs -f J && next`
    stops after a failure)."""
    api = state.connect()
    job_id = state.job_id(job)
    tail = client.LogTail(api, job_id, task, attempt)

    def on_text(text: str) -> None:
        if as_json:
            click.echo(json.dumps({"attempt": tail.attempt, "content": text}))
        else:
            click.echo(text, nl=False)

    try:
        if keep_following:
            _ended(client.follow(api, job_id, tail, on_text))
        else:
            for text in tail.read():
                on_text(text)
    except KeyboardInterrupt:
        raise SystemExit(130) from None


def _ended(job: dict[str, Any]) -> None:
    """Says on stderr how a followed job ended; a failure unless it Completed."""
    meta, status = job["metadata"], job["status"]
    said = f"{meta.get('name')} ({meta['id']}) ended {render.phase_label(status)}"
    if status.get("phase") == COMPLETED:
        click.echo(said, err=True)
        return
    raise render.Failure(f"{said}: {status['reason']}" if status.get("reason") else said)


@click.command(short_help="Show a job's events, oldest first.")
@click.argument("job")
@render.json_option()
@click.pass_obj
def events(state: State, job: str, as_json: bool) -> None:
    """Show a job's events (what happened to it and when), oldest first."""
    found = state.connect().events(state.job_id(job), limit=100, order="asc")
    if as_json:
        render.print_json(found)
        return
    table = render.table("TIME", "LEVEL", "SOURCE", "MESSAGE")
    for e in found.get("events", []):
        table.add_row(
            render.time_any(e.get("time")),
            render.cell(e.get("level")),
            render.cell(e.get("source")),
            render.esc(render.cell(e.get("message"))),
        )
    state.out.print(table)
    shown, total = len(found.get("events", [])), found.get("total", 0)
    if total and shown < int(total):
        state.out.print(f"[dim]{shown} of {total} events[/]")


@click.command(short_help="Stop a training job.")
@click.argument("job")
@render.json_option()
@click.pass_obj
def stop(state: State, job: str, as_json: bool) -> None:
    """Stop a training job: its processes get the grace period, then are killed."""
    job_id = state.job_id(job)
    found = state.connect().terminate(job_id)
    if as_json:
        render.print_json(found)
    else:
        state.out.print(f"stopping {job_id} ({render.phase_label(found.get('status', {}))})")


@click.command(short_help="Delete a training job and its logs.")
@click.argument("job")
@render.json_option()
@click.pass_obj
def delete(state: State, job: str, as_json: bool) -> None:
    """Delete a training job and its logs; a running one is stopped first, its outputs are
    kept."""
    job_id = state.job_id(job)
    state.connect().delete(job_id)
    if as_json:
        render.print_json({"id": job_id, "deleted": True})
    else:
        state.out.print(f"deleted {job_id}")


def _resource(job: dict[str, Any]) -> dict[str, Any]:
    return jobfile.dig(job, "spec", "resource") or {}


COMMANDS = (submit, list_jobs, show, logs, events, stop, delete)
