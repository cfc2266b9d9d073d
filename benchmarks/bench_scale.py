"""corral at the scale a lab reaches after a few months, measured through its HTTP API.

A long history (100,000 ended jobs, 1,000,000 events), a deep queue (10,000 waiting), many
tasks running at once (1,000), many people watching (100 log followers, 50 clients), one
log flooding while 100 follow it (flood.py). Each section starts `corral server` as its
own process (a temporary CORRAL_HOME, default settings but for what the section says),
fills the database through the store where a user's months would have (bulk inserts), and
times the calls a user makes. Each figure is printed beside its target and, where one
exists, a baseline from the same run. Nothing here asserts: the targets are printed as
PASS or MISS (see README.md in this directory).

    python benchmarks/bench_scale.py [--only history,queue,clients,running,followers,
                                             flood,submit]
                                     [--quick] [--no-postgres] [--json PATH]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import dataclasses
import json
import os
import pathlib
import random
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from http import client as http_client
from typing import Any

import bench_local
import bench_scheduler
import flood
import psutil
import sqlalchemy as sa

SECTIONS = ("history", "queue", "clients", "running", "followers", "flood", "submit")
PG_ADMIN_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
DAY_MS = 86_400_000
#: name prefixes in the history: each names 1 job in PREFIXES
PREFIXES = 500
SLEEP = "sleep 3600"


@dataclasses.dataclass(frozen=True)
class Sizes:
    history: int  #: ended jobs in the database
    events: int  #: events per ended job
    small: int  #: ended jobs in the baseline's database
    repeats: int  #: timed calls of each kind
    queued: int  #: jobs waiting
    nodes: int  #: simulated nodes for the scheduling decision and pass
    passes: int  #: timed reconciler passes
    running: int  #: sleeping tasks at once
    idle_s: float  #: how long the server's CPU is read while nothing changes (long enough
    #: for a resource sample, which comes every 5-50 s: domain/pacing.py)
    followers: int  #: clients following logs
    writers: int  #: jobs writing logs
    lines_per_s: int  #: per writing job
    follow_s: float  #: how long the followers follow
    clients: int  #: clients calling show and search at once
    calls: int  #: calls per client
    submit_s: float  #: how long submissions are sustained
    submitters: int  #: client threads submitting
    flood_followers: int  #: clients following one flooding log
    flood_mb: int  #: what the flooding job writes
    flood_s: float  #: how long they follow it


FULL = Sizes(history=100_000, events=10, small=1_000, repeats=100, queued=10_000, nodes=100,
             passes=20, running=1000, idle_s=60.0, followers=100, writers=10,
             lines_per_s=100, follow_s=20.0, clients=50, calls=40, submit_s=60.0,
             submitters=8, flood_followers=100, flood_mb=2000, flood_s=30.0)
QUICK = Sizes(history=2_000, events=10, small=200, repeats=20, queued=500, nodes=20,
              passes=3, running=10, idle_s=2.0, followers=6, writers=2, lines_per_s=20,
              follow_s=3.0, clients=5, calls=5, submit_s=3.0, submitters=2,
              flood_followers=6, flood_mb=50, flood_s=3.0)

log = bench_local.log
pct = bench_local.percentile


# --- databases and servers ------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Db:
    name: str  #: SQLite or PostgreSQL
    admin_url: str | None = None  #: PostgreSQL: where a throwaway database is made


@contextlib.contextmanager
def database(db: Db, home: pathlib.Path) -> Iterator[tuple[str, dict[str, str]]]:
    """(the database's URL, the server's environment for it); a PostgreSQL database made
    for the block and dropped after it."""
    if db.admin_url is None:
        yield f"sqlite:///{home / 'corral.db'}", {}
        return
    name = f"corral_scale_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    admin = sa.create_engine(db.admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE {name}")
    url = db.admin_url.rsplit("/", 1)[0] + "/" + name
    try:
        yield url, {"CORRAL_DATABASE_URL": url}
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.dispose()


@contextlib.contextmanager
def fresh_home(parent: pathlib.Path) -> Iterator[pathlib.Path]:
    parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".corral-scale-", dir=parent) as tmp:
        yield pathlib.Path(tmp) / "home"


@contextlib.contextmanager
def server(home: pathlib.Path, env: dict[str, str]) -> Iterator[bench_local.Server]:
    srv = bench_local.start_server(home, env)
    try:
        yield srv
    finally:
        stop(srv)


def stop(srv: bench_local.Server) -> None:
    """Stop the server, then kill every process its launcher started (keepers, tasks)."""
    left: list[psutil.Process] = []
    for pid in bench_local._launchers(srv.proc.pid):
        with contextlib.suppress(psutil.NoSuchProcess):
            left += psutil.Process(pid).children(recursive=True)
    bench_local.stop_server(srv)
    for p in left:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()


def timed(fn: Callable[[], bench_local.Reply]) -> float:
    t0 = time.perf_counter()
    r = fn()
    ms = (time.perf_counter() - t0) * 1000
    if r.status_code >= 400:
        raise SystemExit(f"HTTP {r.status_code}: {r.text[:300]}")
    return ms


def summary(ms: Sequence[float]) -> dict[str, float]:
    return {"p50_ms": statistics.median(ms), "p99_ms": pct(ms, 0.99), "max_ms": max(ms),
            "n": len(ms)}


# --- a long history ---------------------------------------------------------------------------


SPEC = json.dumps({"kind": "job", "metadata": {"name": "history", "workspace_id": "0"},
                   "algorithm": {"command": "python train.py"},
                   "spec": {"resource": {"flavor_id": "corral.cpu.1u", "node_count": 1}}})
ENDS = [("Completed", "Completed", 0), ("Completed", "Completed", 0),
        ("Completed", "Completed", 0), ("Completed", "Completed", 0),
        ("Completed", "Completed", 0), ("Completed", "Completed", 0),
        ("Completed", "Completed", 0), ("Failed", "Failed", 1), ("Failed", "Failed", 1),
        ("Terminated", "Terminated", 143)]


def build_history(url: str, project_id: str, n: int, events: int, now: int) -> None:
    """`n` ended jobs over the last 90 days, each with an attempt, a task and `events`
    events; one job in ten with 30 resource samples. Bulk inserts through the store's
    tables (SQLAlchemy Core executemany), 5,000 jobs a transaction."""
    from corral.store import schema

    engine = sa.create_engine(url)
    span = 90 * DAY_MS
    try:
        with engine.begin() as conn:
            seq0 = conn.execute(sa.select(sa.func.coalesce(sa.func.max(schema.jobs.c.seq), 0))
                                ).scalar_one()
        for lo in range(0, n, 5000):
            jobs, attempts, tasks, evs, samples = [], [], [], [], []
            for i in range(lo, min(n, lo + 5000)):
                job_id = str(uuid.UUID(int=i + 1))
                created = now - span + span * i // n
                phase, secondary, code = ENDS[i % len(ENDS)]
                start, end = created + 2000, created + 2000 + 60_000 * (1 + i % 30)
                jobs.append({
                    "id": job_id, "seq": seq0 + i + 1, "project_id": project_id,
                    "name": f"exp{i % PREFIXES:03d}-run-{i}", "description": "",
                    "kind": "job", "user_name": "admin", "phase": phase,
                    "secondary_phase": secondary, "spec": SPEC, "flavor_id": "corral.cpu.1u",
                    "node_count": 1, "cpu": 1.0, "memory_mb": 1024, "gpu": 0,
                    "retry_limit": 0, "create_time": created, "updated_at": end,
                    "start_time": start, "end_time": end, "pool_id": "default",
                    "priority": 1, "family_id": job_id, "version": 1, "finalized_at": end})
                attempts.append({"job_id": job_id, "seq": 1, "start_at": start, "end_at": end,
                                 "start_type": "init_or_rescheduled",
                                 "end_reason": f"exited with {code}"})
                tasks.append({"job_id": job_id, "attempt": 1, "name": "worker-0", "rank": 0,
                              "node": "local", "state": "exited", "launch_id": f"l{i}",
                              "gpu_ids": "", "exit_code": code, "launched_at": start,
                              "ended_at": end})
                evs += [{"job_id": job_id, "time": created + k * 1000, "level": "Info",
                         "source": "Job", "message": f"event {k} of {job_id}"}
                        for k in range(events)]
                if i % 10 == 0:
                    samples += [{"job_id": job_id, "attempt": 1, "task": "worker-0",
                                 "time": start + k * 5000, "cpu_usage": 50.0,
                                 "mem_usage": 10.0, "mem_mb": 100.0, "gpu_util": 0.0,
                                 "gpu_mem_usage": 0.0} for k in range(30)]
            with engine.begin() as conn:
                conn.execute(schema.jobs.insert(), jobs)
                conn.execute(schema.attempts.insert(), attempts)
                conn.execute(schema.tasks.insert(), tasks)
                conn.execute(schema.job_events.insert(), evs)
                if samples:
                    conn.execute(schema.task_metrics.insert(), samples)
        if engine.dialect.name == "postgresql":
            with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                conn.exec_driver_sql("VACUUM ANALYZE")  # as autovacuum would have by now
    finally:
        engine.dispose()


def searches(n: int, now: int) -> dict[str, dict[str, Any]]:
    """The searches a user makes, first page (10 rows, newest first)."""
    mid = now - 45 * DAY_MS
    return {
        "list": {"limit": 10},
        "phase": {"limit": 10, "filters": [{"key": "phase", "value": ["Failed"]}]},
        "name prefix": {"limit": 10, "filters": [
            {"key": "name", "operator": "like", "value": [f"exp{n % PREFIXES:03d}-"]}]},
        "time range": {"limit": 10, "filters": [
            {"key": "create_time", "operator": "between", "value": [mid, mid + DAY_MS]}]},
    }


def measure_history(db: Db, n: int, sizes: Sizes, parent: pathlib.Path,
                    clients: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"jobs": n, "events": n * sizes.events}
    with fresh_home(parent) as home, database(db, home) as (url, env):
        with server(home, env) as srv:  # the first start makes the project and a login
            project = srv.project_id
        now = int(time.time() * 1000)
        t0 = time.perf_counter()
        build_history(url, project, n, sizes.events, now)
        out["build_s"] = time.perf_counter() - t0
        log(f"  {db.name}: {n} jobs, {n * sizes.events} events built in "
            f"{out['build_s']:.1f} s")
        t0 = time.perf_counter()
        with server(home, env) as srv:
            out["start_s"] = time.perf_counter() - t0
            timed(lambda: srv.http.post(srv.path("/training-job-searches"), json={}))
            out["answers_s"] = time.perf_counter() - t0
            out.update(_history_calls(srv, n, sizes, now))
            if clients:
                out["clients"] = many_clients(srv, n, sizes, now)
    return out


def _history_calls(srv: bench_local.Server, n: int, sizes: Sizes,
                   now: int) -> dict[str, Any]:
    rnd = random.Random(1)
    http = srv.http
    out: dict[str, Any] = {"search": {}}
    for name, body in searches(n, now).items():
        timed(lambda body=body: http.post(srv.path("/training-job-searches"), json=body))
        ms = [timed(lambda body=body: http.post(srv.path("/training-job-searches"),
                                                json=body)) for _ in range(sizes.repeats)]
        out["search"][name] = summary(ms)
    deep = {"limit": 10, "offset": n // 20}  # half way down the list
    out["search"]["deep page"] = summary(
        [timed(lambda: http.post(srv.path("/training-job-searches"), json=deep))
         for _ in range(max(5, sizes.repeats // 10))])
    before = http.post(srv.path("/training-job-searches"),
                       json={"limit": 10, "offset": n // 20 - 1}).json()
    if "next_cursor" in before:  # the same page by corral's cursor
        by_cursor = {"limit": 10, "cursor": before["next_cursor"]}
        out["search"]["deep cursor"] = summary(
            [timed(lambda: http.post(srv.path("/training-job-searches"), json=by_cursor))
             for _ in range(max(5, sizes.repeats // 10))])
    shows: dict[str, list[float]] = {"job": [], "events": [], "metrics": []}
    for _ in range(sizes.repeats):
        i = rnd.randrange(0, n, 10)  # a job with resource samples
        job = f"/training-jobs/{uuid.UUID(int=i + 1)}"
        shows["job"].append(timed(lambda job=job: http.get(srv.path(job))))
        shows["events"].append(timed(lambda job=job: http.get(
            srv.path(f"{job}/events?limit=50"))))
        shows["metrics"].append(timed(lambda job=job: http.get(
            srv.path(f"{job}/metrics/worker-0"))))
    out["show"] = {k: summary(v) for k, v in shows.items()}
    return out


def many_clients(srv: bench_local.Server, n: int, sizes: Sizes, now: int) -> dict[str, Any]:
    """`clients` clients at once, each with its own connection, alternating a show and a
    search (of the kinds above) `calls` times."""
    bodies = list(searches(n, now).values())
    token = srv.http.headers["X-Auth-Token"]
    errors: list[str] = []
    lat: list[float] = []
    lock = threading.Lock()
    start = threading.Barrier(sizes.clients)

    def client(k: int) -> None:
        rnd = random.Random(k)
        with bench_local.Http(srv.url, token) as http:
            http.get("/healthz")
            start.wait()
            for c in range(sizes.calls):
                t0 = time.perf_counter()
                if c % 2:
                    r = http.post(srv.path("/training-job-searches"), json=rnd.choice(bodies))
                else:
                    r = http.get(srv.path(f"/training-jobs/{uuid.UUID(int=rnd.randrange(n) + 1)}"))
                ms = (time.perf_counter() - t0) * 1000
                with lock:
                    lat.append(ms)
                    if r.status_code >= 400:
                        errors.append(f"{r.status_code} {r.text[:100]}")

    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(sizes.clients) as pool:
        list(pool.map(client, range(sizes.clients)))
    wall = time.perf_counter() - t0
    return {**summary(lat), "errors": len(errors), "first_error": errors[:1],
            "calls_per_s": len(lat) / wall}


def section_history(dbs: Sequence[Db], sizes: Sizes, parent: pathlib.Path,
                    clients: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for db in dbs:
        log(f"history on {db.name}: baseline of {sizes.small} jobs, then {sizes.history}")
        out[db.name] = {"small": measure_history(db, sizes.small, sizes, parent, False),
                        "large": measure_history(db, sizes.history, sizes, parent, clients)}
    return out



# --- a deep queue, and submissions sustained ---------------------------------------------------


def submit(srv: bench_local.Server, http: bench_local.Http) -> bench_local.Reply:
    return http.post(srv.path("/training-jobs"), json=bench_local.job_body(SLEEP, "queued"))


def fill_queue(url: str, like: str, n: int) -> None:
    """`n` more jobs waiting, copies of the waiting job `like` (new id, name and number)."""
    from corral.store import schema

    jobs = schema.jobs
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            row = dict(conn.execute(sa.select(jobs).where(jobs.c.id == like)).one()._mapping)
            seq0 = conn.execute(sa.select(sa.func.max(jobs.c.seq))).scalar_one()
            copies = []
            for i in range(n):
                job_id = str(uuid.uuid4())
                copies.append({**row, "id": job_id, "family_id": job_id, "version": 1,
                               "name": f"deep-{i}", "seq": seq0 + 1 + i,
                               "wait_code": None, "wait_reason": None})
            conn.execute(jobs.insert(), copies)
    finally:
        engine.dispose()


def waiting(url: str) -> tuple[int, int]:
    """(jobs waiting, those the scheduler has not yet said why)."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            q = "SELECT count(*), count(*) - count(wait_code) FROM jobs WHERE phase = 'Pending'"
            n, unnoted = conn.exec_driver_sql(q).one()
            return int(n), int(unnoted)
    finally:
        engine.dispose()


def settle(url: str, timeout: float = 120) -> None:
    """Until the scheduler's passes have said why the jobs in its window wait (a few
    hundred reasons a pass): what it notes stops changing."""
    deadline = time.monotonic() + timeout
    last = -1
    while (now := waiting(url)[1]) != last and time.monotonic() < deadline:
        last = now
        time.sleep(2)


def busy_node(srv: bench_local.Server) -> None:
    """Two sleeping jobs take the node's two cores: what is submitted next waits."""
    ids = []
    for _ in range(2):
        r = submit(srv, srv.http)
        r.raise_for_status()
        ids.append(r.json()["metadata"]["id"])
    for job_id in ids:
        bench_local.wait_phase(srv, job_id, "Running")


def sustained(srv: bench_local.Server, sizes: Sizes) -> dict[str, Any]:
    """`submitters` clients submitting as fast as they are answered, for `submit_s`."""
    token = srv.http.headers["X-Auth-Token"]
    accepted: list[float] = []  # when each was answered
    lat: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    t0 = time.perf_counter()
    end = t0 + sizes.submit_s

    def client(_: int) -> None:
        with bench_local.Http(srv.url, token) as http:
            while (now := time.perf_counter()) < end:
                r = submit(srv, http)
                done = time.perf_counter()
                with lock:
                    lat.append((done - now) * 1000)
                    if r.status_code == 201:
                        accepted.append(done - t0)
                    else:
                        errors.append(f"{r.status_code} {r.text[:100]}")

    with concurrent.futures.ThreadPoolExecutor(sizes.submitters) as pool:
        list(pool.map(client, range(sizes.submitters)))
    wall = time.perf_counter() - t0
    per_s = [0] * (int(sizes.submit_s) or 1)
    for t in accepted:
        if int(t) < len(per_s):
            per_s[int(t)] += 1
    return {"accepted": len(accepted), "errors": len(errors), "first_error": errors[:1],
            "jobs_per_s": len(accepted) / wall, "worst_second": min(per_s),
            **summary(lat)}


def section_queue(dbs: Sequence[Db], sizes: Sizes, parent: pathlib.Path,
                  sections: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "queue" in sections:
        log(f"queue: a scheduling decision and a reconciler pass with {sizes.queued} waiting")
        out["queue"] = {
            "decision": bench_scheduler.decision_time(sizes.queued, sizes.nodes,
                                                      max(5, sizes.passes), 1),
            "pass": bench_scheduler.tick_time(sizes.queued, sizes.nodes, sizes.passes, 1),
            "submit": {}}
    if "submit" in sections:
        out["submit"] = {}
    for db in dbs:
        with fresh_home(parent) as home, database(db, home) as (url, env), \
                server(home, {**env, "CORRAL_CPUS": "2"}) as srv:
            busy_node(srv)
            if "queue" in sections:
                log(f"  {db.name}: submitting with a short queue, then with {sizes.queued}")
                short = [timed(lambda: submit(srv, srv.http)) for _ in range(sizes.repeats)]
                like = submit(srv, srv.http).json()["metadata"]["id"]
                fill_queue(url, like, sizes.queued)
                settle(url)
                deep = [timed(lambda: submit(srv, srv.http)) for _ in range(sizes.repeats)]
                out["queue"]["submit"][db.name] = {
                    "short": summary(short), "deep": summary(deep),
                    "waiting": waiting(url)[0]}
            if "submit" in sections:
                log(f"  {db.name}: submitting for {sizes.submit_s:.0f} s")
                out["submit"][db.name] = sustained(srv, sizes)
    return out


def queue_rows(r: dict[str, Any], sizes: Sizes) -> list[Row]:
    d, p = r["decision"], r["pass"]
    out = [Row(f"{sizes.queued} waiting on {sizes.nodes} nodes: one scheduling decision, "
               "median", "< 20 ms", {"SQLite": _ms(d["median_ms"])},
               "20.7 ms before this work (quoted)", d["median_ms"] < 20),
           Row(f"{sizes.queued} waiting: one reconciler pass, median", "< 100 ms",
               {"SQLite": _ms(p["median_ms"])}, "121 ms before this work (quoted)",
               p["median_ms"] < 100)]
    sub = r["submit"]
    if sub:
        out.append(Row(f"{sizes.queued} waiting: submit one more, p99", "< 50 ms",
                       {db: _ms(v["deep"]["p99_ms"]) for db, v in sub.items()},
                       "short queue: " + "; ".join(f"{db} {_ms(v['short']['p99_ms'])}"
                                                   for db, v in sub.items()),
                       sub["SQLite"]["deep"]["p99_ms"] < 50 if "SQLite" in sub else None))
    return out


def submit_rows(r: dict[str, Any], sizes: Sizes) -> list[Row]:
    figs = {db: f"{v['jobs_per_s']:.0f} jobs/s (worst second {v['worst_second']}), "
                f"{v['errors']} errors" for db, v in r.items()}
    ok = r["SQLite"]["jobs_per_s"] >= 200 and not r["SQLite"]["errors"] if "SQLite" in r \
        else None
    return [Row(f"submissions sustained for {sizes.submit_s:.0f} s "
                f"({sizes.submitters} clients)", ">= 200 jobs/s", figs, "-", ok)]



# --- many tasks running at once -----------------------------------------------------------------


def pss_mb(pid: int) -> float:
    """Proportional set size: shared pages count in part, so forked processes add up
    honestly (RSS would count their shared pages once per process)."""
    with open(f"/proc/{pid}/smaps_rollup") as fh:
        for line in fh:
            if line.startswith("Pss:"):
                return int(line.split()[1]) / 1024
    return 0.0


def footprint(srv: bench_local.Server) -> dict[str, float]:
    """Memory of the server, its launcher, the keepers (one per task) and the tasks."""
    out = {"server_rss": bench_local.rss_mb(srv.proc.pid), "server_pss": pss_mb(srv.proc.pid),
           "launcher_rss": 0.0, "launcher_pss": 0.0, "keepers_rss": 0.0, "keepers_pss": 0.0,
           "keepers": 0, "tasks_pss": 0.0}
    for pid in bench_local._launchers(srv.proc.pid):
        out["launcher_rss"] += bench_local.rss_mb(pid)
        out["launcher_pss"] += pss_mb(pid)
        for keeper in psutil.Process(pid).children():
            with contextlib.suppress(psutil.NoSuchProcess, FileNotFoundError):
                out["keepers_rss"] += keeper.memory_info().rss / 2**20
                out["keepers_pss"] += pss_mb(keeper.pid)
                out["keepers"] += 1
                for task in keeper.children(recursive=True):
                    out["tasks_pss"] += pss_mb(task.pid)
    return out


def cpu_of(pids: Sequence[int]) -> float:
    """CPU seconds the processes have used (their own, not their children's)."""
    tick = float(os.sysconf("SC_CLK_TCK"))
    return sum(bench_local._proc_cpu(pid)[0] for pid in pids) / tick


def idle_cpu(srv: bench_local.Server, seconds: float) -> dict[str, float]:
    """Share of a core the server and its launcher use over `seconds` (nobody calls)."""
    launchers = bench_local._launchers(srv.proc.pid)
    s0, l0, t0 = cpu_of([srv.proc.pid]), cpu_of(launchers), time.perf_counter()
    time.sleep(seconds)
    wall = time.perf_counter() - t0
    return {"server": (cpu_of([srv.proc.pid]) - s0) / wall,
            "launcher": (cpu_of(launchers) - l0) / wall}


def count(srv: bench_local.Server, phase: str) -> int:
    r = srv.http.post(srv.path("/training-job-searches"), json={
        "limit": 1, "filters": [{"key": "phase", "value": [phase]}]})
    r.raise_for_status()
    return int(r.json()["count"])


def section_running(sizes: Sizes, parent: pathlib.Path) -> dict[str, Any]:
    """`running` jobs of `sleep 3600` at once, on a node said to have a core and a GiB for
    each (CORRAL_CPUS, CORRAL_MEMORY_GB)."""
    n = sizes.running
    env = {"CORRAL_CPUS": str(n + 2), "CORRAL_MEMORY_GB": str(n + 2)}
    with fresh_home(parent) as home, server(home, env) as srv:
        time.sleep(2)
        before = footprint(srv)
        before_cpu = idle_cpu(srv, sizes.idle_s)
        log(f"running: starting {n} sleeping jobs")
        token = srv.http.headers["X-Auth-Token"]

        def post(_: int) -> None:
            with bench_local.Http(srv.url, token) as http:
                submit(srv, http).raise_for_status()

        t0 = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            list(pool.map(post, range(n)))
        deadline = time.monotonic() + 900
        while (up := count(srv, "Running")) < n and time.monotonic() < deadline:
            time.sleep(1)
        started_s = time.perf_counter() - t0
        log(f"  {up} running after {started_s:.0f} s")
        time.sleep(5)  # the launches' own work done
        return {"running": up, "started_s": started_s, "before": before,
                "before_cpu": before_cpu, "after": footprint(srv),
                "after_cpu": idle_cpu(srv, sizes.idle_s)}


def running_rows(r: dict[str, Any], sizes: Sizes) -> list[Row]:
    a, b = r["after"], r["before"]
    both = a["server_pss"] + a["launcher_pss"]
    with_keepers = both + a["keepers_pss"]
    base = b["server_pss"] + b["launcher_pss"]
    cpu, bcpu = r["after_cpu"], r["before_cpu"]
    return [
        Row(f"{r['running']} tasks running: server + launcher memory (PSS)", "< 300 MB",
            {"SQLite": f"{both:.0f} MB (server {a['server_pss']:.0f}, launcher "
                       f"{a['launcher_pss']:.0f})"}, f"no task: {base:.0f} MB", both < 300),
        Row(f"the same with the {a['keepers']} keepers (one per task)", "printed",
            {"SQLite": f"{with_keepers:.0f} MB (keepers {a['keepers_pss']:.0f}; RSS summed "
                       f"{a['keepers_rss']:.0f})"}, "-"),
        Row(f"{r['running']} tasks running: server CPU while nothing changes", "< 5% of a core",
            {"SQLite": f"{cpu['server'] * 100:.1f}% (launcher {cpu['launcher'] * 100:.1f}%)"},
            f"no task: {bcpu['server'] * 100:.1f}%", cpu["server"] < 0.05),
    ]


# --- many people following logs -----------------------------------------------------------------


WRITER = """import sys, time
rate = float(sys.argv[1])
pad = "x" * 60
i, t = 0, time.time()
while True:
    print(f"{time.time():.6f} {i} {pad}", flush=True)
    i += 1
    t += 1 / rate
    time.sleep(max(0.0, t - time.time()))
"""


class Follower:
    """One client following a task's log through the stream the console and `logs -f` use,
    noting how late each line arrives (its writer stamped it)."""

    def __init__(self, srv: bench_local.Server, job_id: str, token: str) -> None:
        self.late: list[float] = []
        self.first = self.last = -1
        self.lines = 0
        self._buf = ""
        self._conn = http_client.HTTPConnection(srv.http.host, srv.http.port, timeout=30)
        self._conn.request("GET", srv.path(f"/training-jobs/{job_id}/tasks/worker-0/logs/"
                                           "stream?tail=0&timeout=600"),
                           headers={"X-Auth-Token": token})
        self._resp = self._conn.getresponse()
        if self._resp.status != 200:
            raise SystemExit(f"stream: HTTP {self._resp.status}")

    def follow(self, until: float) -> None:
        with contextlib.suppress(OSError, ValueError, http_client.HTTPException):
            while time.time() < until:
                line = self._resp.readline().decode()
                if not line:
                    return
                if line.startswith("data: "):
                    data = json.loads(line[6:])
                    if "content" in data:
                        self._take(data["content"], time.time())

    def _take(self, content: str, now: float) -> None:
        *whole, self._buf = (self._buf + content).split("\n")
        for text in whole:
            stamp, i = text.split()[:2]
            self.late.append((now - float(stamp)) * 1000)
            self.first = int(i) if self.first < 0 else self.first
            self.last = int(i)
            self.lines += 1

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._conn.sock.shutdown(2)  # type: ignore[union-attr]
        self._conn.close()


def section_followers(sizes: Sizes, parent: pathlib.Path) -> dict[str, Any]:
    env = {"CORRAL_CPUS": str(sizes.writers + 2)}
    with fresh_home(parent) as home, server(home, env) as srv:
        script = home.parent / "writer.py"
        script.write_text(WRITER)
        command = f"{sys.executable} -u {script} {sizes.lines_per_s}"
        ids = []
        for _ in range(sizes.writers):
            r = srv.http.post(srv.path("/training-jobs"),
                              json=bench_local.job_body(command, "writer"))
            r.raise_for_status()
            ids.append(r.json()["metadata"]["id"])
        for job_id in ids:
            bench_local.wait_phase(srv, job_id, "Running")
        log(f"followers: {sizes.writers} jobs writing {sizes.lines_per_s} lines/s; "
            f"server CPU with nobody following, then with {sizes.followers} followers")
        time.sleep(1)
        alone = idle_cpu(srv, sizes.follow_s)
        token = srv.http.headers["X-Auth-Token"]
        until = time.time() + sizes.follow_s + 1
        followers, threads = [], []
        for k in range(sizes.followers):  # each read from the moment its stream is open
            followers.append(Follower(srv, ids[k % len(ids)], token))
            threads.append(threading.Thread(target=followers[-1].follow, args=(until,)))
            threads[-1].start()
        time.sleep(1)  # every stream caught up with the log's end
        followed = idle_cpu(srv, sizes.follow_s)
        for t in threads:
            t.join()
        for f in followers:
            f.close()
    late = [x for f in followers for x in f.late]
    missing = sum(max(0, f.last - f.first + 1 - f.lines) for f in followers if f.lines)
    return {"lines": len(late), "missing": missing, "silent": sum(not f.lines for f in followers),
            "expected": sizes.followers * sizes.lines_per_s * (sizes.follow_s + 1),
            "late": summary(late) if late else {}, "cpu_alone": alone, "cpu": followed}


def followers_rows(r: dict[str, Any], sizes: Sizes) -> list[Row]:
    late = r["late"] or {"p50_ms": 0.0, "p99_ms": 0.0, "max_ms": 0.0}
    return [
        Row(f"{sizes.followers} clients following {sizes.writers} logs of "
            f"{sizes.lines_per_s} lines/s: a line's delay, max", "< 200 ms",
            {"SQLite": f"max {_ms(late['max_ms'])}, p99 {_ms(late['p99_ms'])}, p50 "
                       f"{_ms(late['p50_ms'])}; {r['lines']} lines, {r['missing']} missing, "
                       f"{r['silent']} streams silent"},
            "-", late["max_ms"] < 200 and not r["missing"] and not r["silent"]),
        Row("the same: server CPU", "< 50% of a core",
            {"SQLite": f"{r['cpu']['server'] * 100:.0f}%"},
            f"nobody following: {r['cpu_alone']['server'] * 100:.0f}%",
            r["cpu"]["server"] < 0.5),
    ]


def section_flood(sizes: Sizes, parent: pathlib.Path) -> dict[str, Any]:
    with fresh_home(parent) as home, server(home, {}) as srv:
        before = cpu_of([srv.proc.pid])
        r = flood.section_flood(sizes.flood_followers, sizes.flood_mb, sizes.flood_s, srv,
                                home)
        r["cpu"] = (cpu_of([srv.proc.pid]) - before) / sizes.flood_s
    return r


def flood_rows(r: dict[str, Any], sizes: Sizes) -> list[Row]:
    got, first, hz = r["mb_per_follower"], r["first_s"], r["healthz"]
    n = r["followers"]
    return [
        Row(f"1 job writing {r['mb']} MB, {n} clients following its log from its start "
            f"({r['seconds']:g} s): streams that got lines", "all",
            {"SQLite": f"{n - r['silent']} of {n} (first after {first['median']:.1f} s, "
                       f"at most {first['max']:.1f} s); MB each min / median / max "
                       f"{got['min']:.1f} / {got['median']:.1f} / {got['max']:.1f}, "
                       f"{r['mb_per_s']:.0f} MB/s in all"},
            "-", not r["silent"]),
        Row("the same: /healthz once a second", f"no timeout ({flood.HEALTH_TIMEOUT_S:g} s)",
            {"SQLite": f"median {_ms(hz['median_ms'])}, max {_ms(hz['max_ms'])}; "
                       f"{hz['timeouts']} of {hz['probes']} timed out"},
            "-", hz["timeouts"] == 0 and hz["probes"] > 0),
        Row("the same: server CPU", "printed", {"SQLite": f"{r['cpu'] * 100:.0f}%"}),
    ]


# --- the report -----------------------------------------------------------------------------


@dataclasses.dataclass
class Row:
    what: str
    target: str
    figures: dict[str, str]  #: per database
    baseline: str = "-"
    ok: bool | None = None


def _ms(x: float) -> str:
    return f"{x:.1f} ms" if x < 1000 else f"{x / 1000:.2f} s"


def history_rows(r: dict[str, Any], sizes: Sizes) -> list[Row]:
    out: list[Row] = []

    def add(what: str, target: str, limit: float, get: Callable[[dict[str, Any]], float],
            fmt: Callable[[float], str] = _ms) -> None:
        figs = {db: fmt(get(v["large"])) for db, v in r.items()}
        base = "; ".join(f"{db} {fmt(get(v['small']))}" for db, v in r.items())
        ok = all(get(v["large"]) < limit for db, v in r.items() if db == "SQLite") \
            if "SQLite" in r else None
        out.append(Row(what, target, figs, f"{sizes.small} jobs: {base}", ok))

    for name in ("list", "phase", "name prefix", "time range"):
        add(f"search by {name}, first page, p99", "< 100 ms", 100,
            lambda v, name=name: v["search"][name]["p99_ms"])
    for name, how in (("deep page", "by offset"), ("deep cursor", "by cursor")):
        if all(name in v["large"]["search"] for v in r.values()):
            out.append(Row(f"search, a page half way down {how}, p99", "printed",
                           {db: _ms(v["large"]["search"][name]["p99_ms"])
                            for db, v in r.items()},
                           f"{sizes.small} jobs: " + "; ".join(
                               f"{db} {_ms(v['small']['search'][name]['p99_ms'])}"
                               for db, v in r.items())))
    for name in ("job", "events", "metrics"):
        add(f"show {name}, p99", "< 20 ms", 20, lambda v, name=name: v["show"][name]["p99_ms"])
    add("server start until it answers /healthz", "< 5 s", 5,
        lambda v: v["start_s"], lambda x: f"{x:.2f} s")
    add("server start until a search answers", "< 5 s", 5,
        lambda v: v["answers_s"], lambda x: f"{x:.2f} s")
    return out


def clients_rows(r: dict[str, Any], sizes: Sizes) -> list[Row]:
    figs = {db: f"p99 {_ms(v['large']['clients']['p99_ms'])}, "
                f"{v['large']['clients']['errors']} errors, "
                f"{v['large']['clients']['calls_per_s']:.0f} calls/s"
            for db, v in r.items() if "clients" in v["large"]}
    ok = None
    if "SQLite" in r and "clients" in r["SQLite"]["large"]:
        c = r["SQLite"]["large"]["clients"]
        ok = c["p99_ms"] < 300 and c["errors"] == 0
    return [Row(f"{sizes.clients} clients calling show and search at once", "p99 < 300 ms, "
                "no errors", figs, "-", ok)]


def table(rows: Sequence[Row], dbs: Sequence[str]) -> str:
    head = ["what", "target", *dbs, "baseline (same run)", "verdict"]
    body = [[r.what, r.target, *[r.figures.get(db, "-") for db in dbs], r.baseline,
             "printed" if r.ok is None else ("PASS" if r.ok else "MISS")] for r in rows]
    widths = [max(len(x) for x in col) for col in zip(head, *body, strict=True)]
    lines = ["  ".join(x.ljust(w) for x, w in zip(line, widths, strict=True)).rstrip()
             for line in [head, ["-" * w for w in widths], *body]]
    return "\n".join(lines)


def report(figures: dict[str, Any], sizes: Sizes, dbs: Sequence[str]) -> str:
    rows: list[Row] = []
    if "history" in figures:
        rows += history_rows(figures["history"], sizes)
        rows += clients_rows(figures["history"], sizes)
    for key, fn in (("queue", queue_rows), ("running", running_rows),
                    ("followers", followers_rows), ("flood", flood_rows),
                    ("submit", submit_rows)):
        if key in figures:
            rows += fn(figures[key], sizes)
    load = figures["load"]
    head = (f"corral at scale: {sizes.history} ended jobs, {sizes.queued} waiting, "
            f"{sizes.running} running, {sizes.followers} followers; {os.cpu_count()} CPUs; "
            f"load average {load['before']:.2f} before, {load['after']:.2f} after")
    return head + "\n\n" + table(rows, dbs)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", default=",".join(SECTIONS),
                   help=f"sections to run, comma-separated, of {','.join(SECTIONS)}")
    p.add_argument("--quick", action="store_true", help="small numbers: about a minute")
    p.add_argument("--no-postgres", action="store_true", help="SQLite only")
    p.add_argument("--postgres", default=PG_ADMIN_URL,
                   help="a PostgreSQL database to make throwaway databases from")
    p.add_argument("--home-parent", type=pathlib.Path,
                   default=bench_local.DEFAULT_HOME_PARENT)
    p.add_argument("--json", help="also write every figure here")
    a = p.parse_args(argv)
    a.sections = [s for s in a.only.split(",") if s]
    bad = set(a.sections) - set(SECTIONS)
    if bad:
        p.error(f"unknown section {sorted(bad)[0]!r}; one of {', '.join(SECTIONS)}")
    return a


def main(argv: Sequence[str] | None = None) -> int:
    a = parse_args(argv)
    sizes = QUICK if a.quick else FULL
    dbs = [Db("SQLite")] + ([] if a.no_postgres else [Db("PostgreSQL", a.postgres)])
    figures: dict[str, Any] = {"sizes": dataclasses.asdict(sizes),
                               "load": {"before": os.getloadavg()[0]}}
    if "history" in a.sections or "clients" in a.sections:
        figures["history"] = section_history(dbs, sizes, a.home_parent,
                                             "clients" in a.sections)
    if "queue" in a.sections or "submit" in a.sections:
        figures.update(section_queue(dbs, sizes, a.home_parent, a.sections))
    if "running" in a.sections:
        figures["running"] = section_running(sizes, a.home_parent)
    if "followers" in a.sections:
        figures["followers"] = section_followers(sizes, a.home_parent)
    if "flood" in a.sections:
        figures["flood"] = section_flood(sizes, a.home_parent)
    figures["load"]["after"] = os.getloadavg()[0]
    print(report(figures, sizes, [db.name for db in dbs]))
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
