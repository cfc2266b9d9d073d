"""The `corral` command: run the server, submit and watch training jobs, try the demo.

Everything except `corral server` and `corral demo` talks to a running server over HTTP
through `corral.client`, found at the `url` setting (`CORRAL_URL`). Expected failures (an
error answer, an unreachable server, a bad job file) print one red line and exit with 1;
a traceback means a bug.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
from collections.abc import Iterator
from typing import Any

import click
import pydantic
import rich.console
import rich.table

import corral
from corral import client, jobfile, terminal
from corral import demo as demo_mod
from corral import settings as settings_mod
from corral.domain import errors
from corral.domain import jobs as jobs_mod

PHASES = [p.value for p in jobs_mod.Phase]


@dataclasses.dataclass
class State:
    """What every command gets: the settings, and a client made on first use."""

    settings: settings_mod.Settings
    api: client.Client | None = None
    out: rich.console.Console = dataclasses.field(default_factory=terminal.console)

    def connect(self) -> client.Client:
        if self.api is None:
            self.api = client.Client(self.settings.url)
        return self.api


pass_state = click.make_pass_decorator(State)


class _Group(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except client.ClientError as exc:
            raise terminal.Failure(str(exc)) from None


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--url", help="server to talk to (default: the CORRAL_URL setting)")
@click.version_option(corral.__version__, prog_name="corral")
@click.pass_context
def cli(ctx: click.Context, url: str | None) -> None:
    """corral: a self-hosted AI training platform with a ModelArts-compatible API."""
    if ctx.obj is None:
        # `main()` normally builds the settings; this serves callers that invoke `cli` directly.
        ctx.obj = State(settings_mod.load())
    state = ctx.find_object(State)
    assert state is not None
    if url:
        state.settings = state.settings.model_copy(update={"url": url})
        state.api = None


def main() -> None:
    try:
        settings = settings_mod.load()
    except (OSError, ValueError) as exc:  # pydantic's ValidationError is a ValueError
        terminal.Failure(f"bad corral settings: {_settings_problem(exc)}").show()
        raise SystemExit(1) from None
    cli.main(prog_name="corral", obj=State(settings))


def _settings_problem(exc: Exception) -> str:
    if isinstance(exc, pydantic.ValidationError):
        return "; ".join(
            f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors(include_url=False)
        )
    return terminal.one_line(exc)


# -- server and demo ------------------------------------------------------------------------


@cli.command()
@click.option("--host", help="address to listen on (default: the CORRAL_HOST setting)")
@click.option("--port", type=int, help="port to listen on (default: the CORRAL_PORT setting)")
@click.option("--ray", "ray_address", metavar="ADDRESS",
              help="run jobs on this Ray cluster: auto, HOST:PORT or ray://HOST:PORT "
                   "(default: the CORRAL_RAY_ADDRESS setting)")
@pass_state
def server(state: State, host: str | None, port: int | None, ray_address: str | None) -> None:
    """Run the corral server in the foreground."""
    # Imported here so that client commands do not pay for loading the whole server.
    from corral import server as server_mod

    update = {k: v for k, v in (("host", host), ("port", port), ("ray_address", ray_address))
              if v is not None}
    try:
        server_mod.serve(state.settings.model_copy(update=update))
    except errors.CorralError as exc:  # already running, port taken, database unreachable
        raise terminal.Failure(exc.message) from None


@cli.command()
@click.option("--epochs", type=int, help="override the example's number of epochs")
@click.option("--json", "as_json", is_flag=True, help="print only a JSON summary")
@pass_state
def demo(state: State, epochs: int | None, as_json: bool) -> None:
    """Train the example MLP on an embedded server and sum up the run."""
    demo_mod.run(state.settings, state.out, epochs, as_json)


# -- submitting -----------------------------------------------------------------------------


@cli.command()
@click.argument("file", type=click.Path(path_type=pathlib.Path))
@click.option("--json", "as_json", is_flag=True, help="print the created job as JSON")
@pass_state
def submit(state: State, file: pathlib.Path, as_json: bool) -> None:
    """Submit a training job described by FILE (a ModelArts create body, JSON or YAML).

    Relative local paths in it are taken from FILE's folder.
    """
    job = state.connect().create_job(jobfile.load_job_file(file))
    if as_json:
        terminal.print_json(job)
        return
    meta, label = job["metadata"], terminal.phase_label(job.get("status", {}))
    state.out.print(
        f"submitted [bold]{terminal.esc(meta['name'])}[/] as [bold]{meta['id']}[/] ({label})"
    )
    state.out.print(f"[dim]follow it with: corral logs -f {meta['id']}[/]")


@cli.command(name="jobs")
@click.option(
    "--phase",
    "phases",
    multiple=True,
    type=click.Choice(PHASES, case_sensitive=False),
    help="only jobs in this phase (repeatable)",
)
@click.option("--name", help="only jobs whose name contains this")
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True)
@click.option("--json", "as_json", is_flag=True)
@pass_state
def list_jobs(
    state: State, phases: tuple[str, ...], name: str | None, limit: int, as_json: bool
) -> None:
    """List training jobs, newest first."""
    total, items = _search(state.connect(), list(phases), name, limit)
    if as_json:
        terminal.print_json({"total": total, "count": len(items), "items": items})
        return
    table = terminal.table(
        "ID", "NAME", "PHASE", "FLAVOR", "NODES", "CREATED", "DURATION", "REASON"
    )
    for job in items:
        meta, status, res = job["metadata"], job["status"], _resource(job)
        table.add_row(
            meta["id"],
            meta["name"],
            terminal.phase_label(status),
            res.get("flavor_id") or "-",
            str(res.get("node_count", "-")),
            terminal.time_ms(meta.get("create_time")),
            terminal.duration(status.get("duration")),
            status.get("reason") or "",
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


@cli.command()
@click.argument("job_id")
@click.option("--json", "as_json", is_flag=True)
@pass_state
def show(state: State, job_id: str, as_json: bool) -> None:
    """Show one training job: state, tasks, runs and what it runs."""
    job = state.connect().get_job(job_id)
    if as_json:
        terminal.print_json(job)
        return
    out, meta, status = state.out, job["metadata"], job["status"]
    out.print(f"[bold]{terminal.esc(meta['name'])}[/] ({meta['id']})")
    out.print(_overview(job))
    if status.get("task_statuses"):
        tasks = terminal.table("TASK", "EXIT CODE", "MESSAGE")
        for t in status["task_statuses"]:
            tasks.add_row(
                t.get("task", "-"), terminal.cell(t.get("exit_code")), t.get("message") or ""
            )
        out.print(tasks)
    if status.get("running_records"):
        out.print(_records_table(status["running_records"]))


def _overview(job: dict[str, Any]) -> rich.table.Table:
    meta, status, algo, res = job["metadata"], job["status"], job["algorithm"], _resource(job)
    grid = terminal.grid()
    grid.add_row("phase", f"{status.get('phase')} / {status.get('secondary_phase')}")
    if status.get("reason"):
        grid.add_row("reason", terminal.esc(status["reason"]))
    grid.add_row("created", terminal.time_ms(meta.get("create_time")))
    grid.add_row("started", terminal.time_ms(status.get("start_time")))
    grid.add_row("duration", terminal.duration(status.get("duration")))
    if meta.get("description"):
        grid.add_row("description", terminal.esc(meta["description"]))
    flavor = res.get("flavor_name") or res.get("flavor_id") or "-"
    grid.add_row("resource", f"{flavor} x {res.get('node_count', 1)} node(s)")
    grid.add_row("tasks", ", ".join(status.get("tasks") or []) or "-")
    engine = algo.get("engine") or {}
    if engine:
        grid.add_row(
            "engine",
            " ".join(filter(None, (engine.get("engine_name"), engine.get("engine_version"))))
            or "-",
        )
    for label, value in _algorithm_rows(algo):
        grid.add_row(label, terminal.esc(value))
    return grid


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
            yield key[:-1], f"{ch.get('name')}: {url}"


def _records_table(records: list[dict[str, Any]]) -> rich.table.Table:
    table = terminal.table("#", "STARTED", "ENDED", "START", "END REASON", "TASK", "RECOVERY")
    for i, r in enumerate(records, 1):
        table.add_row(
            str(i),
            terminal.time_s(r.get("start_at")),
            terminal.time_s(r.get("end_at")),
            terminal.cell(r.get("start_type")),
            terminal.cell(r.get("end_reason")),
            terminal.cell(r.get("end_related_task")),
            terminal.cell(r.get("end_recover")),
        )
    return table


@cli.command()
@click.argument("job_id")
@click.option(
    "-f", "--follow", "keep_following", is_flag=True, help="keep printing until the job ends"
)
@click.option("--task", default=jobfile.FIRST_TASK, show_default=True)
@click.option("--attempt", type=int, help="a given run of the task (default: the latest)")
@click.option("--json", "as_json", is_flag=True, help="print the log chunks as JSON lines")
@pass_state
def logs(
    state: State,
    job_id: str,
    keep_following: bool,
    task: str,
    attempt: int | None,
    as_json: bool,
) -> None:
    """Print a task's log; with -f, keep following it until the job ends."""
    api = state.connect()
    tail = client.LogTail(api, job_id, task, attempt)

    def on_text(text: str) -> None:
        if as_json:
            click.echo(json.dumps({"attempt": tail.attempt, "content": text}))
        else:
            click.echo(text, nl=False)

    try:
        if keep_following:
            client.follow(api, job_id, tail, on_text)
        else:
            for text in tail.read():
                on_text(text)
    except KeyboardInterrupt:
        raise SystemExit(130) from None


@cli.command()
@click.argument("job_id")
@click.option("--json", "as_json", is_flag=True)
@pass_state
def events(state: State, job_id: str, as_json: bool) -> None:
    """Show a job's events, oldest first."""
    found = state.connect().events(job_id, limit=100, order="asc")
    if as_json:
        terminal.print_json(found)
        return
    table = terminal.table("TIME", "LEVEL", "SOURCE", "MESSAGE")
    for e in found.get("events", []):
        table.add_row(
            terminal.time_any(e.get("time")),
            terminal.cell(e.get("level")),
            terminal.cell(e.get("source")),
            terminal.cell(e.get("message")),
        )
    state.out.print(table)
    shown, total = len(found.get("events", [])), found.get("total", 0)
    if total and shown < int(total):
        state.out.print(f"[dim]{shown} of {total} events[/]")


# -- changing jobs --------------------------------------------------------------------------


@cli.command()
@click.argument("job_id")
@click.option("--json", "as_json", is_flag=True)
@pass_state
def stop(state: State, job_id: str, as_json: bool) -> None:
    """Stop a training job (its processes get the grace period, then are killed)."""
    job = state.connect().terminate(job_id)
    if as_json:
        terminal.print_json(job)
    else:
        state.out.print(f"stopping {job_id} ({terminal.phase_label(job.get('status', {}))})")


@cli.command()
@click.argument("job_id")
@click.option("--json", "as_json", is_flag=True)
@pass_state
def delete(state: State, job_id: str, as_json: bool) -> None:
    """Delete a training job and its records."""
    state.connect().delete(job_id)
    if as_json:
        terminal.print_json({"id": job_id, "deleted": True})
    else:
        state.out.print(f"deleted {job_id}")


# -- the platform ---------------------------------------------------------------------------


@cli.command()
@click.option("--json", "as_json", is_flag=True)
@pass_state
def flavors(state: State, as_json: bool) -> None:
    """List the resource flavors jobs can ask for."""
    found = state.connect().flavors()
    if as_json:
        terminal.print_json(found)
        return
    table = terminal.table("ID", "NAME", "TYPE", "CPU", "GPU", "MEMORY", "MAX NODES")
    for f in found.get("flavors", []):
        info = f.get("flavor_info") or {}
        cpu, gpu, mem = info.get("cpu") or {}, info.get("gpu") or {}, info.get("memory") or {}
        gpus = f"{gpu.get('unit_num')} x {gpu.get('product_name')}" if gpu.get("unit_num") else "-"
        table.add_row(
            f.get("flavor_id"),
            f.get("flavor_name"),
            terminal.cell(f.get("flavor_type")),
            terminal.cell(cpu.get("core_num")),
            gpus,
            f"{mem.get('size', '-')} {mem.get('unit', '')}",
            terminal.cell(f.get("max_num")),
        )
    state.out.print(table)


@cli.command()
@click.option("--json", "as_json", is_flag=True)
@pass_state
def engines(state: State, as_json: bool) -> None:
    """List the engines (Python interpreters) boot files can run on."""
    found = state.connect().engines()
    if as_json:
        terminal.print_json(found)
        return
    table = terminal.table("ID", "NAME", "VERSION")
    for e in found.get("items", []):
        table.add_row(
            e.get("engine_id"), e.get("engine_name"), terminal.cell(e.get("engine_version"))
        )
    state.out.print(table)


@cli.command()
@click.option("--json", "as_json", is_flag=True)
@pass_state
def info(state: State, as_json: bool) -> None:
    """Show which server the CLI talks to and what it runs on."""
    api = state.connect()
    found = api.info()
    if as_json:
        terminal.print_json({"url": api.base_url, **found})
        return
    grid = terminal.grid()
    grid.add_row("server", api.base_url)
    for key in ("version", "default_project_id", "database", "home"):
        grid.add_row(key.replace("_", " "), terminal.esc(terminal.cell(found.get(key))))
    state.out.print(grid)
    nodes = found.get("nodes")
    if isinstance(nodes, list) and nodes and all(isinstance(n, dict) for n in nodes):
        table = terminal.table(*(str(k).upper() for k in nodes[0]))
        for node in nodes:
            table.add_row(*(terminal.compact(node.get(k)) for k in nodes[0]))
        state.out.print(table)
    elif nodes is not None:
        state.out.print(f"nodes: {terminal.compact(nodes)}")


# -- reading jobs -------------------------------------------------------------------------


def _resource(job: dict[str, Any]) -> dict[str, Any]:
    return jobfile.dig(job, "spec", "resource") or {}
