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
from corral import client, credentials, jobfile, terminal
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
        """A client for the server, with the credential of the current login if any."""
        if self.api is None:
            login = self.login()
            if login is None:
                self.api = client.Client(self.settings.url)
            else:
                self.api = client.Client(self.url(login), login.project_id, token=login.token,
                                         access_key=login.access_key,
                                         secret_key=login.secret_key)
        return self.api

    def login(self) -> credentials.Login | None:
        return credentials.read(self.settings.credentials_file)

    def url(self, login: credentials.Login | None) -> str:
        """--url or CORRAL_URL when given, else the login's server, else the default."""
        if "url" in self.settings.model_fields_set or login is None or not login.url:
            return self.settings.url
        return login.url


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
              help="run the default pool's jobs on this Ray cluster: auto, HOST:PORT or "
                   "ray://HOST:PORT "
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
    for label, value in _scheduling_rows(job):
        grid.add_row(label, terminal.esc(value))
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
        yield "queue", (f"{queue.get('wait_code')}, {queue.get('jobs_ahead')} job(s) ahead "
                        f"in pool {queue.get('pool_id')}")
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
    table = terminal.table("ID", "NAME", "TYPE", "CPU", "GPU", "ACCELERATORS", "MEMORY",
                           "MAX NODES")
    for f in found.get("flavors", []):
        info = f.get("flavor_info") or {}
        cpu, gpu, mem = info.get("cpu") or {}, info.get("gpu") or {}, info.get("memory") or {}
        gpus = f"{gpu.get('unit_num')} x {gpu.get('product_name')}" if gpu.get("unit_num") else "-"
        accels = ", ".join(f"{a.get('unit_num')} {a.get('name')}"
                           for a in info.get("accelerators") or [] if isinstance(a, dict))
        table.add_row(
            f.get("flavor_id"),
            f.get("flavor_name"),
            terminal.cell(f.get("flavor_type")),
            terminal.cell(cpu.get("core_num")),
            gpus,
            terminal.esc(accels) or "-",
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


@cli.command()
@click.option("--pool", "pool_id", help="only this pool")
@click.option("--json", "as_json", is_flag=True)
@pass_state
def queue(state: State, pool_id: str | None, as_json: bool) -> None:
    """Show the jobs waiting in each pool, in order, with why each waits."""
    found = state.connect().queue(pool_id)
    if as_json:
        terminal.print_json(found)
        return
    for pool in found.get("pools", []):
        jobs = pool.get("jobs", [])
        state.out.print(f"[bold]pool {terminal.esc(str(pool.get('pool_id')))}[/]: "
                        f"{len(jobs)} waiting")
        if not jobs:
            continue
        table = terminal.table("#", "ID", "NAME", "PROJECT", "PRIO", "FLAVOR", "NODES", "WAIT",
                               "REASON")
        for j in jobs:
            table.add_row(str(j.get("position")), j.get("id") or "-",
                          terminal.esc(j.get("name") or "(other project)"),
                          str(j.get("project_id", ""))[:8], terminal.cell(j.get("priority")),
                          terminal.cell(j.get("flavor_id")), terminal.cell(j.get("node_count")),
                          terminal.cell(j.get("wait_code")), terminal.esc(j.get("reason") or ""))
        state.out.print(table)


@cli.command()
@click.option("--json", "as_json", is_flag=True)
@pass_state
def pools(state: State, as_json: bool) -> None:
    """Show each pool's capacity and use, and use and quota per project."""
    found = state.connect().pools()
    if as_json:
        terminal.print_json(found)
        return
    for pool in found.get("pools", []):
        cap, used = pool.get("capacity") or {}, pool.get("used") or {}
        runs = terminal.esc(str(pool.get("executor") or "local"))
        if pool.get("address"):
            runs += f" at {terminal.esc(str(pool['address']))}"
        state.out.print(
            f"[bold]pool {terminal.esc(str(pool.get('pool_id')))}[/] ({runs}): "
            f"{len(pool.get('nodes') or [])} node(s), {_amounts(used)} used of {_amounts(cap)}"
            f", {pool.get('pending_jobs', 0)} waiting")
        table = terminal.table("PROJECT", "NAME", "USED", "QUOTA", "BORROWING", "WEIGHT",
                               "RECENT SHARE")
        for p in pool.get("projects") or []:
            limits = p.get("limits")
            table.add_row(str(p.get("project_id")), terminal.esc(p.get("name") or ""),
                          _amounts(p.get("used") or {}),
                          _amounts(limits) if limits else ("-" if limits is None
                                                           else "none"),
                          "yes" if p.get("borrowing") else "no",
                          terminal.cell(p.get("weight", 1.0)),
                          f"{100 * float(p.get('recent_share') or 0):.1f}%")
        state.out.print(table)


@cli.command()
@click.option("--pool", "pool_id", help="the pool to set a quota in (omit to show quotas)")
@click.option("--cpu", type=click.FloatRange(min=0), help="cores")
@click.option("--memory-gb", type=click.FloatRange(min=0))
@click.option("--gpu", type=click.IntRange(min=0))
@click.option("--accel", "accel", multiple=True, metavar="NAME=N",
              help="a limit on an accelerator by name (repeatable), e.g. --accel npu=8")
@click.option("--borrowing/--no-borrowing", default=False,
              help="may use idle capacity beyond the quota (reclaimed first)")
@click.option("--weight", type=click.FloatRange(min=0, min_open=True), default=1.0,
              show_default=True, help="fair share against other projects")
@click.option("--remove", is_flag=True, help="remove the quota in --pool")
@click.option("--json", "as_json", is_flag=True)
@pass_state
def quota(state: State, pool_id: str | None, cpu: float | None, memory_gb: float | None,
          gpu: int | None, accel: tuple[str, ...], borrowing: bool, weight: float,
          remove: bool, as_json: bool) -> None:
    """Show the project's quotas, or set (admin) its quota in one pool."""
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
        terminal.print_json(found)
        return
    table = terminal.table("POOL", "QUOTA", "USED", "BORROWING", "WEIGHT")
    for q in found.get("quotas", []):
        table.add_row(q["pool_id"], _amounts(q.get("limits") or {}) or "none",
                      _amounts(q.get("used") or {}), "yes" if q.get("borrowing") else "no",
                      terminal.cell(q.get("weight")))
    state.out.print(table)


def _amounts(a: dict[str, Any]) -> str:
    parts = []
    for key, unit in (("cpu", " CPU"), ("memory_gb", " GB"), ("gpu", " GPU")):
        if a.get(key) is not None:
            parts.append(f"{a[key]:g}{unit}")
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


# -- reading jobs -------------------------------------------------------------------------


def _resource(job: dict[str, Any]) -> dict[str, Any]:
    return jobfile.dig(job, "spec", "resource") or {}


# -- identity -------------------------------------------------------------------------------


@cli.command()
@click.option("--token", help="a bearer token (what `corral users create` printed)")
@click.option("--access-key", help="an access key (with --secret-key)")
@click.option("--secret-key", help="its secret key")
@click.option("--project", help="project id or name (default: the key's, or your first)")
@click.option("--json", "as_json", is_flag=True)
@pass_state
def login(state: State, token: str | None, access_key: str | None, secret_key: str | None,
          project: str | None, as_json: bool) -> None:
    """Log in to the server with a token or an access key pair (kept in CORRAL_HOME)."""
    if not token and not (access_key and secret_key):
        raise terminal.Failure("give --token, or --access-key and --secret-key")
    url = state.settings.url
    with client.Client(url, "-", token=token, access_key=access_key,
                       secret_key=secret_key) as api:
        me = api.whoami()
    projects = me.get("projects") or []
    chosen = [p for p in projects if project in (None, p["project_id"], p["name"])]
    if not chosen:
        raise terminal.Failure(f"you are in no project {project!r}" if project
                               else "you are in no project yet: ask a platform admin")
    login = credentials.Login(project_id=chosen[0]["project_id"], user=me["user"], url=url,
                              token=token, access_key=access_key, secret_key=secret_key)
    credentials.write(state.settings.credentials_file, login)
    if as_json:
        terminal.print_json({"user": me["user"], "project_id": login.project_id, "url": url})
    else:
        state.out.print(f"logged in to {url} as [bold]{terminal.esc(me['user'])}[/], project "
                        f"{chosen[0]['name']} ({login.project_id}), role {chosen[0]['role']}")


@cli.command()
@click.option("--json", "as_json", is_flag=True)
@pass_state
def whoami(state: State, as_json: bool) -> None:
    """Who the current login is, and their projects and roles."""
    me = state.connect().whoami()
    if as_json:
        terminal.print_json(me)
        return
    admin = " (platform admin)" if me.get("is_admin") else ""
    state.out.print(f"[bold]{terminal.esc(me['user'])}[/]{admin}, with a {me['credential']}")
    state.out.print(_projects_table(me.get("projects") or []))


@cli.command()
@click.option("--new", is_flag=True, help="always make a new token")
@click.option("--ttl", type=click.IntRange(min=60), help="seconds the new token lives")
@pass_state
def token(state: State, new: bool, ttl: int | None) -> None:
    """Print a bearer token of the current login, e.g. for curl -H "X-Auth-Token: ...".

    The login's own token when it has one; else (a key-pair login) a new token, bound to
    the key's project, which is kept in the login for next time.
    """
    login = state.login()
    if login is None:
        raise terminal.Failure("not logged in: run `corral login` first")
    if login.token and not new:
        click.echo(login.token)
        return
    made = state.connect().create_token("corral token", ttl)
    if not login.token and ttl is None:
        login.token = made["token"]
        credentials.write(state.settings.credentials_file, login)
    click.echo(made["token"])


def _projects_table(projects: list[dict[str, Any]]) -> rich.table.Table:
    table = terminal.table("ID", "NAME", "ROLE", "CREATED")
    for p in projects:
        table.add_row(p["project_id"], terminal.esc(p["name"]), terminal.cell(p.get("role")),
                      terminal.time_ms(p.get("created_at")))
    return table


@cli.group(invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def projects(ctx: click.Context, as_json: bool) -> None:
    """List your projects; a platform admin manages them with the subcommands."""
    if ctx.invoked_subcommand is None:
        state = ctx.find_object(State)
        assert state is not None
        found = state.connect().projects()
        if as_json:
            terminal.print_json(found)
        else:
            state.out.print(_projects_table(found["projects"]))


@projects.command(name="create")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True)
@pass_state
def projects_create(state: State, name: str, as_json: bool) -> None:
    """Create a project (platform admin)."""
    made = state.connect().create_project(name)
    if as_json:
        terminal.print_json(made)
    else:
        state.out.print(f"created project {terminal.esc(name)} ({made['project_id']})")


@projects.command(name="add-member")
@click.argument("project")
@click.argument("user")
@click.option("--role", type=click.Choice(["viewer", "member", "admin"]), default="member",
              show_default=True)
@pass_state
def projects_add_member(state: State, project: str, user: str, role: str) -> None:
    """Give USER ROLE in PROJECT (id or name), or change their role (platform admin)."""
    state.connect().set_member(project, user, role)
    state.out.print(f"{terminal.esc(user)} is {role} in {terminal.esc(project)}")


@projects.command(name="remove-member")
@click.argument("project")
@click.argument("user")
@pass_state
def projects_remove_member(state: State, project: str, user: str) -> None:
    """Take USER out of PROJECT; their keys for it are revoked (platform admin)."""
    state.connect().remove_member(project, user)
    state.out.print(f"{terminal.esc(user)} is no longer in {terminal.esc(project)}")


@cli.group(invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def users(ctx: click.Context, as_json: bool) -> None:
    """List users (platform admin); create and disable them with the subcommands."""
    if ctx.invoked_subcommand is None:
        state = ctx.find_object(State)
        assert state is not None
        found = state.connect().users()
        if as_json:
            terminal.print_json(found)
            return
        table = terminal.table("NAME", "ADMIN", "PROJECTS")
        for u in found["users"]:
            table.add_row(terminal.esc(u["name"]), "yes" if u["is_admin"] else "",
                          ", ".join(f"{p}:{r}" for p, r in u["projects"].items()))
        state.out.print(table)


@users.command(name="create")
@click.argument("name")
@click.option("--project", "project_names", multiple=True,
              help="project id or name (repeatable; default: the login's project)")
@click.option("--role", type=click.Choice(["viewer", "member", "admin"]), default="member",
              show_default=True)
@click.option("--admin", "is_admin", is_flag=True, help="a platform admin")
@click.option("--json", "as_json", is_flag=True)
@pass_state
def users_create(state: State, name: str, project_names: tuple[str, ...], role: str,
                 is_admin: bool, as_json: bool) -> None:
    """Create a user and print their first token (shown only now)."""
    api = state.connect()
    made = api.create_user(name, {p: role for p in project_names or (api.project_id,)},
                           is_admin)
    if as_json:
        terminal.print_json(made)
        return
    state.out.print(f"created {terminal.esc(name)}; give them this token (shown only now), "
                    f"for `corral login --token ...`:")
    click.echo(made["token"])


@users.command(name="disable")
@click.argument("name")
@pass_state
def users_disable(state: State, name: str) -> None:
    """Disable a user: all their keys and tokens stop working at once."""
    state.connect().disable_user(name)
    state.out.print(f"disabled {terminal.esc(name)}")


@cli.group()
def keys() -> None:
    """Access key pairs of the login's project, for the ModelArts SDKs."""


@keys.command(name="create")
@click.option("--description", default="", help="what the key is for")
@click.option("--json", "as_json", is_flag=True,
              help="print access_key, secret_key and project_id as JSON")
@pass_state
def keys_create(state: State, description: str, as_json: bool) -> None:
    """Create an access key pair of yours; its secret key is shown only now."""
    made = state.connect().create_key(description)
    if as_json:
        terminal.print_json({k: made[k] for k in ("access_key", "secret_key", "project_id")})
        return
    grid = terminal.grid()
    for k in ("access_key", "secret_key", "project_id"):
        grid.add_row(k, made[k])
    state.out.print(grid)
    state.out.print("[dim]the secret key is shown only now[/]")


@keys.command(name="list")
@click.option("--json", "as_json", is_flag=True)
@pass_state
def keys_list(state: State, as_json: bool) -> None:
    """Your keys of the project (a project admin sees everyone's); never secrets."""
    found = state.connect().keys()
    if as_json:
        terminal.print_json(found)
        return
    table = terminal.table("ACCESS KEY", "USER", "CREATED", "REVOKED", "DESCRIPTION")
    for k in found["keys"]:
        table.add_row(k["access_key"], terminal.esc(k["user_name"]),
                      terminal.time_ms(k["created_at"]),
                      terminal.time_ms(k["revoked_at"]) if k.get("revoked_at") else "",
                      terminal.esc(k["description"]))
    state.out.print(table)


@keys.command(name="revoke")
@click.argument("access_key")
@pass_state
def keys_revoke(state: State, access_key: str) -> None:
    """Revoke an access key: it stops working at once."""
    state.connect().revoke_key(access_key)
    state.out.print(f"revoked {access_key}")

# Versions, training metrics and the model registry live in their own module.
from corral import cli_models  # noqa: E402

cli_models.install(cli)
