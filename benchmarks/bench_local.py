"""Speed and memory of the embedded server against bare processes, measured in one run.

Every figure is printed next to a baseline taken in the same run on the same machine (a
bare `subprocess.Popen` of the same trivial job), so that a busy or slow machine moves
both and the ratio stays meaningful. Nothing here asserts: the targets are printed as
PASS/MISS for a person to read (see README.md in this directory).

    python benchmarks/bench_local.py [--jobs 500] [--seq 30] [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import dataclasses
import json
import os
import pathlib
import resource
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterator, Sequence
from http import client as http_client
from typing import Any

import psutil
import sqlalchemy as sa

from corral.sdk import credentials

TRIVIAL = [sys.executable, "-c", "print(1)"]
FLAVOR = "corral.cpu.1u"
TERMINAL = ["Completed", "Failed", "Terminated", "Abnormal"]
POLL_S = 0.002  # between GETs while one job runs: fine enough for a ~20 ms job
BURST_POLL_S = 0.1  # between searches while the burst runs
CLIENT_THREADS = 8

#: Ray Jobs on this machine, as the issue quotes them: for scale, not measured here.
RAY_QUOTED = {"per_job_s": 1.0, "jobs_100_s": 75.0, "idle_rss_mb": 640.0}


@dataclasses.dataclass(frozen=True)
class Sizes:
    seq: int  #: sequential jobs timed one at a time
    warmup: int  #: untimed jobs first (imports, caches, connection pool)
    jobs: int  #: jobs submitted at once
    terminates: int  #: running jobs stopped one at a time
    history: int = 0  #: finished jobs already in the database when the measuring starts


@dataclasses.dataclass
class Server:
    """A corral server running as its own process, as `corral server` runs it."""

    proc: subprocess.Popen[bytes]
    home: pathlib.Path
    url: str
    project_id: str
    http: Http

    def path(self, rest: str) -> str:
        return f"/v2/{self.project_id}{rest}"


# --- small helpers ----------------------------------------------------------------------


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclasses.dataclass
class Reply:
    status_code: int
    text: str

    def json(self) -> Any:
        return json.loads(self.text)

    def raise_for_status(self) -> None:
        if self.status_code >= 400:
            raise SystemExit(f"HTTP {self.status_code}: {self.text[:500]}")


class Http:
    """One keep-alive HTTP/1.1 connection, as a client program holds one.

    The standard library's client, not httpx: the client runs on the same cores as the
    server and the jobs, and httpx spends about five times the CPU per request, which
    would be counted against corral. TCP_NODELAY, because a request written in pieces
    otherwise waits ~40 ms for the server's delayed ACK (Nagle's algorithm).
    """

    def __init__(self, url: str, token: str | None = None) -> None:
        parts = urllib.parse.urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.headers = {"Content-Type": "application/json"}
        if token:
            self.headers["X-Auth-Token"] = token
        self._conn: http_client.HTTPConnection | None = None

    def request(self, method: str, path: str, json_body: Any = None) -> Reply:
        body = None if json_body is None else json.dumps(json_body)
        for retry in (False, True):
            conn = self._connect()
            try:
                conn.request(method, path, body=body, headers=self.headers)
                r = conn.getresponse()
                return Reply(r.status, r.read().decode())
            except (http_client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.close()  # the server closed an idle connection: open another
                if retry:
                    raise
        raise AssertionError("unreachable")

    def get(self, path: str) -> Reply:
        return self.request("GET", path)

    def post(self, path: str, json: Any = None) -> Reply:
        return self.request("POST", path, json)

    def _connect(self) -> http_client.HTTPConnection:
        if self._conn is None:
            conn = http_client.HTTPConnection(self.host, self.port, timeout=60)
            conn.connect()
            assert conn.sock is not None
            conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._conn = conn
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> Http:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def rss_mb(pid: int) -> float:
    return float(psutil.Process(pid).memory_info().rss) / 2**20


def job_body(command: str, prefix: str = "bench") -> dict[str, Any]:
    return {
        "kind": "job",
        "metadata": {"name": f"{prefix}-{uuid.uuid4().hex[:12]}"},
        "algorithm": {"command": command},
        "spec": {"resource": {"flavor_id": FLAVOR, "node_count": 1}},
    }


def trivial_command() -> str:
    return f'{sys.executable} -c "print(1)"'


# --- the server process -----------------------------------------------------------------


def start_server(home: pathlib.Path, extra_env: dict[str, str] | None = None) -> Server:
    """`corral server` on a free port with `home` as its CORRAL_HOME (and `extra_env`)."""
    port = free_port()
    env = {
        **os.environ,
        **(extra_env or {}),
        "CORRAL_HOME": str(home),
        "CORRAL_PORT": str(port),
        "CORRAL_HOST": "127.0.0.1",
    }
    out = open(home.parent / "server.log", "wb")  # noqa: SIM115 - the child holds it
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from corral import server, settings; server.serve(settings.load())",
        ],
        env=env,
        stdout=out,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    out.close()
    url = f"http://127.0.0.1:{port}"
    http = Http(url)
    try:
        _wait_healthy(proc, http, home.parent / "server.log")
    except BaseException:  # a server that never became healthy must not outlive the run
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    login = credentials.read(home / "credentials.json")  # written by the first start
    assert login is not None and login.token, "the server wrote no credential"
    http.headers["X-Auth-Token"] = login.token
    project_id = login.project_id
    return Server(proc=proc, home=home, url=url, project_id=project_id, http=http)


def _wait_healthy(
    proc: subprocess.Popen[bytes], http: Http, log_path: pathlib.Path
) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(
                f"the server exited with {proc.returncode}:\n"
                + log_path.read_text(errors="replace")[-4000:]
            )
        with contextlib.suppress(OSError, http_client.HTTPException):
            if http.get("/healthz").status_code == 200:
                return
        time.sleep(0.05)
    raise SystemExit("the server did not answer /healthz within 60 s")


def stop_server(srv: Server) -> None:
    """SIGTERM the server's group, then kill whatever job process it left behind."""
    srv.http.close()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(srv.proc.pid, signal.SIGTERM)
    try:
        srv.proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(srv.proc.pid, signal.SIGKILL)
        srv.proc.wait()
    kill_job_processes(srv.home)


def kill_job_processes(home: pathlib.Path) -> None:
    """Tasks run in their own sessions; find ours by the run directory in their argv."""
    mark = str(home)
    for p in psutil.process_iter(["pid", "cmdline"]):
        if any(mark in arg for arg in p.info["cmdline"] or ()):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p.info["pid"], signal.SIGKILL)


#: where the server's temporary CORRAL_HOME is made unless --home-parent says otherwise:
#: beside corral's default one (~/.corral), not in /tmp, as a user's server keeps its data
#: in their home directory (on the machine these figures come from, making a file or a
#: directory in /tmp cost 10-40 times what it does in /root; see fs_probe_us)
DEFAULT_HOME_PARENT = pathlib.Path.home()


@contextlib.contextmanager
def running_server(history: int = 0,
                   home_parent: pathlib.Path = DEFAULT_HOME_PARENT) -> Iterator[Server]:
    home_parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".corral-bench-", dir=home_parent) as tmp:
        home = pathlib.Path(tmp) / "home"
        if history:
            add_history(home, history)
        srv = start_server(home)
        try:
            yield srv
        finally:
            stop_server(srv)


def add_history(home: pathlib.Path, n: int) -> None:
    """A home whose database already holds `n` finished jobs, as after months of use: one
    job is run through a server, then its row is copied n - 1 times (new id, name and
    number) while no server runs."""
    srv = start_server(home)
    try:
        job_id = submit(srv, srv.http, trivial_command(), "history")
        wait_phase(srv, job_id, "Completed")
    finally:
        stop_server(srv)
    log(f"  copying a finished job {n - 1} times ...")
    url = os.environ.get("CORRAL_DATABASE_URL") or f"sqlite:///{home / 'corral.db'}"
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            cols = [row[1] for row in conn.exec_driver_sql("PRAGMA table_info(jobs)")]
            made = {"id": "substr(id, 1, 24) || '-' || x.n", "name": "name || '-' || x.n",
                    "seq": "seq + x.n"}
            picked = ", ".join(made.get(c, c) for c in cols)
            conn.exec_driver_sql(
                f"WITH RECURSIVE x(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM x "
                f"WHERE n < {n - 1}) INSERT INTO jobs ({', '.join(cols)}) "
                f"SELECT {picked} FROM jobs, x WHERE jobs.id = '{job_id}'")
    finally:
        engine.dispose()


# --- talking to it ----------------------------------------------------------------------


def submit(srv: Server, http: Http, command: str, prefix: str = "bench") -> str:
    r = http.post(srv.path("/training-jobs"), json=job_body(command, prefix))
    if r.status_code != 201:
        raise SystemExit(f"submit failed: {r.status_code} {r.text}")
    return str(r.json()["metadata"]["id"])


#: what a watching client waits through: `?watch=` with every phase before the end
WATCH_QUERY = "?watch=Creating&watch=Pending&watch=Running&watch=Terminating&timeout=10"


def wait_phase(
    srv: Server, job_id: str, want: str, timeout: float = 60, *, watch: bool = False
) -> None:
    """Until the job is in phase `want`: polling every POLL_S, or (`watch`) with GETs that
    each answer once the job has ended (corral's `?watch=`, see WATCH_QUERY; so `want`
    must be a phase that ends a job)."""
    deadline = time.monotonic() + timeout
    path = srv.path(f"/training-jobs/{job_id}") + (WATCH_QUERY if watch else "")
    while True:
        r = srv.http.get(path)
        phase = r.json()["status"]["phase"]
        if phase == want:
            return
        if phase in TERMINAL:
            raise SystemExit(f"job {job_id} ended {phase}, waiting for {want}")
        if time.monotonic() > deadline:
            raise SystemExit(f"job {job_id} still {phase} after {timeout} s")
        if not watch:
            time.sleep(POLL_S)


def count_in(srv: Server, phases: Sequence[str], prefix: str) -> int:
    """How many jobs whose name holds `prefix` are in one of `phases` (one request)."""
    body = {
        "limit": 1,
        "filters": [
            {"key": "phase", "operator": "in", "value": list(phases)},
            {"key": "name", "operator": "like", "value": [prefix]},
        ],
    }
    r = srv.http.post(srv.path("/training-job-searches"), json=body)
    r.raise_for_status()
    return int(r.json()["count"])


# --- baselines --------------------------------------------------------------------------


def bare_run() -> float:
    t0 = time.perf_counter()
    subprocess.Popen(TRIVIAL, stdout=subprocess.DEVNULL).wait()
    return time.perf_counter() - t0


def bare_pool(n: int, workers: int = 2) -> float:
    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        list(pool.map(lambda _: bare_run(), range(n)))
    return time.perf_counter() - t0


# --- where the CPU goes during the burst ------------------------------------------------


@dataclasses.dataclass(frozen=True)
class CpuMark:
    """CPU seconds so far: the machine's busy and idle time, the server's own, its task
    launcher's own, what the tasks used (the launcher's reaped children, and the server's),
    and this client's own. The kernel's counters, read from /proc."""

    busy: float
    idle: float
    server: float
    launcher: float
    tasks: float
    client: float

    @classmethod
    def take(cls, server_pid: int) -> CpuMark:
        tick = float(os.sysconf("SC_CLK_TCK"))
        with open("/proc/stat") as fh:
            fields = [int(x) for x in fh.readline().split()[1:]]
        idle = fields[3] + fields[4]  # idle + iowait
        server, reaped = _proc_cpu(server_pid)
        launcher = 0
        for pid in _launchers(server_pid):
            own, tasks = _proc_cpu(pid)
            launcher, reaped = launcher + own, reaped + tasks
        me = os.times()
        return cls(busy=(sum(fields[:8]) - idle) / tick, idle=idle / tick,
                   server=server / tick, launcher=launcher / tick, tasks=reaped / tick,
                   client=me.user + me.system)

    def since(self, before: CpuMark, jobs: int, wall: float) -> dict[str, float]:
        return {
            "server_ms_per_job": (self.server - before.server) / jobs * 1e3,
            "launcher_ms_per_job": (self.launcher - before.launcher) / jobs * 1e3,
            "tasks_ms_per_job": (self.tasks - before.tasks) / jobs * 1e3,
            "client_ms_per_job": (self.client - before.client) / jobs * 1e3,
            "idle_cores": (self.idle - before.idle) / wall if wall > 0 else 0.0,
        }


def _proc_cpu(pid: int) -> tuple[int, int]:
    """(own, reaped children's) CPU of a process, in clock ticks."""
    with open(f"/proc/{pid}/stat") as fh:
        raw = fh.read()
    utime, stime, cutime, cstime = (int(x) for x in raw[raw.rindex(")") + 2:].split()[11:15])
    return utime + stime, cutime + cstime


def _launchers(server_pid: int) -> list[int]:
    """The server's task launcher processes (the parents of its tasks)."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as fh:
                raw = fh.read()
            with open(f"/proc/{entry.name}/cmdline", "rb") as fh:
                cmd = fh.read()
        except OSError:
            continue
        if int(raw[raw.rindex(")") + 2:].split()[1]) == server_pid and b"launcher" in cmd:
            found.append(int(entry.name))
    return found


def fs_probe_us(parent: pathlib.Path, n: int = 40) -> float:
    """The median cost of making one directory under `parent`, in microseconds: a job's
    attempt makes a few, and on some disks (and some states of one) it costs tens of times
    what it costs on others, so the report says what this run's disk charged."""
    with tempfile.TemporaryDirectory(prefix=".corral-probe-", dir=parent) as tmp:
        costs = []
        for i in range(n):
            t0 = time.perf_counter()
            os.mkdir(f"{tmp}/{i}")
            costs.append(time.perf_counter() - t0)
    return statistics.median(costs) * 1e6


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def bare_idle_rss() -> float:
    """An idle bare interpreter, for scale against the idle server."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    try:
        time.sleep(0.3)
        return rss_mb(proc.pid)
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait()


def bare_terminate() -> float:
    """SIGTERM a bare `sleep 30` and reap it: the floor for stopping a job."""
    proc = subprocess.Popen(["sleep", "30"], start_new_session=True)
    time.sleep(0.05)
    t0 = time.perf_counter()
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait()
    return time.perf_counter() - t0


# --- measurements -----------------------------------------------------------------------


def corral_run(srv: Server, *, watch: bool = False) -> float:
    t0 = time.perf_counter()
    job_id = submit(srv, srv.http, trivial_command())
    wait_phase(srv, job_id, "Completed", watch=watch)
    return time.perf_counter() - t0


def measure_sequential(srv: Server, sizes: Sizes) -> dict[str, Any]:
    """Bare and corral runs interleaved, so background load hits both alike: each job
    waited on by a client that watches it (`?watch=`) and by one that polls every POLL_S
    (which costs the server a request every few milliseconds while the job runs)."""
    for _ in range(sizes.warmup):
        bare_run()
        corral_run(srv, watch=True)
        corral_run(srv)
    bare, watched, polled = [], [], []
    for i in range(sizes.seq):
        bare.append(bare_run())
        watched.append(corral_run(srv, watch=True))
        polled.append(corral_run(srv))
        log(
            f"  seq {i + 1}/{sizes.seq}: bare {bare[-1] * 1e3:.1f} ms, corral "
            f"{watched[-1] * 1e3:.1f} ms watched, {polled[-1] * 1e3:.1f} ms polled"
        )
    overhead = [c - b for c, b in zip(watched, bare, strict=True)]
    polled_overhead = [c - b for c, b in zip(polled, bare, strict=True)]
    return {
        "bare_median_ms": statistics.median(bare) * 1e3,
        "corral_median_ms": statistics.median(watched) * 1e3,
        "overhead_median_ms": statistics.median(overhead) * 1e3,
        "overhead_p90_ms": percentile(overhead, 0.9) * 1e3,
        "polled_median_ms": statistics.median(polled) * 1e3,
        "polled_overhead_median_ms": statistics.median(polled_overhead) * 1e3,
        "polled_overhead_p90_ms": percentile(polled_overhead, 0.9) * 1e3,
        "bare_ms": [x * 1e3 for x in bare],
        "corral_ms": [x * 1e3 for x in watched],
        "polled_ms": [x * 1e3 for x in polled],
    }


def submit_many(srv: Server, n: int, prefix: str) -> float:
    """Submit n trivial jobs from several client threads; the time until the last is in."""
    t0 = time.perf_counter()
    chunks = [range(i, n, CLIENT_THREADS) for i in range(CLIENT_THREADS)]

    def post_chunk(chunk: range) -> None:
        with Http(srv.url, srv.http.headers["X-Auth-Token"]) as http:
            for _ in chunk:
                submit(srv, http, trivial_command(), prefix)

    with concurrent.futures.ThreadPoolExecutor(CLIENT_THREADS) as pool:
        list(pool.map(post_chunk, chunks))
    return time.perf_counter() - t0


def measure_burst(srv: Server, n: int) -> dict[str, Any]:
    bare_cpu = children_cpu()
    before = bare_pool(n)
    bare_cpu = (children_cpu() - bare_cpu) / n * 1e3
    log(f"  bare pool of 2, {n} runs: {before:.2f} s")
    prefix = f"burst{uuid.uuid4().hex[:6]}"
    mark = CpuMark.take(srv.proc.pid)
    t0 = time.perf_counter()
    submitted = submit_many(srv, n, prefix)
    log(f"  {n} jobs submitted in {submitted:.2f} s")
    done = _wait_all_ended(srv, n, prefix, timeout=max(120.0, n * 1.0))
    total = time.perf_counter() - t0
    cpu = CpuMark.take(srv.proc.pid).since(mark, n, total)
    completed = count_in(srv, ["Completed"], prefix)
    after = bare_pool(n)
    log(
        f"  corral: all {n} ended in {total:.2f} s ({completed} Completed); "
        f"bare pool again: {after:.2f} s"
    )
    bare = (before + after) / 2
    return {
        "jobs": n,
        "corral_s": total,
        "submit_s": submitted,
        "bare_s": bare,
        "bare_before_s": before,
        "bare_after_s": after,
        "completed": completed,
        "ended": done,
        "ratio": total / bare,
        "cpu": {**cpu, "bare_task_ms_per_job": bare_cpu},
    }


def _wait_all_ended(srv: Server, n: int, prefix: str, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    ended = 0
    while time.monotonic() < deadline:
        ended = count_in(srv, TERMINAL, prefix)
        if ended >= n:
            return ended
        time.sleep(BURST_POLL_S)
    log(f"  gave up after {timeout:.0f} s with {ended} of {n} ended")
    return ended


def measure_terminate(srv: Server, n: int) -> dict[str, Any]:
    bare = [bare_terminate() for _ in range(n)]
    corral = []
    for i in range(n):
        job_id = submit(srv, srv.http, "sleep 30")
        wait_phase(srv, job_id, "Running")
        time.sleep(0.1)  # a job that has been running a moment, as a user would stop it
        t0 = time.perf_counter()
        r = srv.http.post(
            srv.path(f"/training-jobs/{job_id}/actions"), json={"action_type": "terminate"}
        )
        if r.status_code != 202:
            raise SystemExit(f"terminate failed: {r.status_code} {r.text}")
        wait_phase(srv, job_id, "Terminated")
        corral.append(time.perf_counter() - t0)
        log(f"  terminate {i + 1}/{n}: {corral[-1] * 1e3:.1f} ms")
    return {
        "corral_median_ms": statistics.median(corral) * 1e3,
        "corral_max_ms": max(corral) * 1e3,
        "bare_median_ms": statistics.median(bare) * 1e3,
        "corral_ms": [x * 1e3 for x in corral],
    }


def measure_idle_rss(srv: Server, settle_s: float = 2.0) -> float:
    time.sleep(settle_s)  # let the reconciler and sampler go quiet
    # With its task launcher, once it has one (it starts with the first task).
    return rss_mb(srv.proc.pid) + sum(rss_mb(pid) for pid in _launchers(srv.proc.pid))


def run_all(sizes: Sizes, home_parent: pathlib.Path = DEFAULT_HOME_PARENT) -> dict[str, Any]:
    home_parent.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {
        "sizes": dataclasses.asdict(sizes),
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "load_before": os.getloadavg(),
        "home_parent": str(home_parent),
        "mkdir_us": fs_probe_us(home_parent),
    }
    results["bare_idle_rss_mb"] = bare_idle_rss()
    with running_server(sizes.history, home_parent) as srv:
        results["server_pid"] = srv.proc.pid
        steps: list[tuple[str, str, Callable[[], Any]]] = [
            ("rss_start_mb", "idle memory after start-up", lambda: measure_idle_rss(srv)),
            ("sequential", f"{sizes.seq} sequential jobs", lambda: measure_sequential(srv, sizes)),
            ("burst", f"{sizes.jobs} jobs at once", lambda: measure_burst(srv, sizes.jobs)),
            ("rss_after_mb", "idle memory after the burst", lambda: measure_idle_rss(srv)),
            (
                "terminate",
                f"{sizes.terminates} terminates",
                lambda: measure_terminate(srv, sizes.terminates),
            ),
        ]
        for key, what, step in steps:
            log(f"measuring {what} ...")
            results[key] = step()
    results["load_after"] = os.getloadavg()
    return results


# --- the report -------------------------------------------------------------------------


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


Row = tuple[str, str, str, str, str, str]


def row(
    label: str, value: float, base: float, unit: str, target: str = "", ok: bool | None = None
) -> Row:
    """One line of the table: the measured value, its baseline and their ratio."""
    ratio = value / base if base else float("nan")
    places = 2 if unit == "s" else 1
    return (
        label,
        f"{value:.{places}f} {unit}",
        f"{base:.{places}f} {unit}",
        f"{ratio:.2f}x" if ratio < 10 else f"{ratio:.0f}x",
        target,
        "" if ok is None else verdict(ok),
    )


def rows(r: dict[str, Any]) -> list[Row]:
    seq, burst, term = r["sequential"], r["burst"], r["terminate"]
    bare_ms, bare_rss, n = seq["bare_median_ms"], r["bare_idle_rss_mb"], burst["jobs"]
    all_done = burst["completed"] == n
    return [
        row("per-job time, watched, median", seq["corral_median_ms"], bare_ms, "ms"),
        row(
            "per-job overhead, watched, median",
            seq["overhead_median_ms"],
            bare_ms,
            "ms",
            "<= 25 ms",
            seq["overhead_median_ms"] <= 25,
        ),
        row("per-job overhead, watched, p90", seq["overhead_p90_ms"], bare_ms, "ms"),
        row(
            f"per-job overhead, polled every {POLL_S * 1e3:g} ms, median",
            seq["polled_overhead_median_ms"],
            bare_ms,
            "ms",
            "<= 25 ms",
            seq["polled_overhead_median_ms"] <= 25,
        ),
        row(
            f"{n} jobs at once, all ended",
            burst["corral_s"],
            burst["bare_s"],
            "s",
            "<= 3x",
            burst["ratio"] <= 3 and all_done,
        ),
        row(
            "idle RSS (server, launcher), after start",
            r["rss_start_mb"],
            bare_rss,
            "MB",
            "< 150 MB",
            r["rss_start_mb"] < 150,
        ),
        row(
            f"idle RSS (server, launcher), after {n} jobs",
            r["rss_after_mb"],
            bare_rss,
            "MB",
            "< 150 MB",
            r["rss_after_mb"] < 150,
        ),
        row(
            "terminate until Terminated, median",
            term["corral_median_ms"],
            term["bare_median_ms"],
            "ms",
            "< 200 ms",
            term["corral_median_ms"] < 200,
        ),
    ]


def table(header: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *body, strict=True)]
    line = "  ".join("-" * w for w in widths)
    fmt = "  ".join(f"{{:{'<' if i == 0 else '>'}{w}}}" for i, w in enumerate(widths))
    return "\n".join([fmt.format(*header), line, *(fmt.format(*row) for row in body)])


def ray_rows(r: dict[str, Any]) -> list[tuple[str, str, str]]:
    seq, burst = r["sequential"], r["burst"]
    per_100 = burst["corral_s"] / burst["jobs"] * 100
    return [
        (
            "trivial job, submit to done",
            f"{RAY_QUOTED['per_job_s'] * 1e3:.0f} ms",
            f"{seq['corral_median_ms']:.1f} ms",
        ),
        (
            "100 trivial jobs",
            f"{RAY_QUOTED['jobs_100_s']:.0f} s",
            f"{per_100:.2f} s (from the {burst['jobs']}-job run)",
        ),
        ("idle memory", f"{RAY_QUOTED['idle_rss_mb']:.0f} MB", f"{r['rss_after_mb']:.1f} MB"),
    ]


def cpu_rows(r: dict[str, Any]) -> list[tuple[str, str, str]]:
    """Where the machine's time went during the burst (for a reader; no target)."""
    cpu = r["burst"].get("cpu")
    if not cpu:
        return []
    return [
        ("the server process", f"{cpu['server_ms_per_job']:.1f} ms", ""),
        ("its launcher process", f"{cpu['launcher_ms_per_job']:.1f} ms", ""),
        ("the task (the job's processes)", f"{cpu['tasks_ms_per_job']:.1f} ms",
         f"{cpu['bare_task_ms_per_job']:.1f} ms (the bare run)"),
        ("this benchmark's client", f"{cpu['client_ms_per_job']:.1f} ms", ""),
        ("cores idle through the run", f"{cpu['idle_cores']:.2f} of {r['cpus']}", ""),
    ]


def report(r: dict[str, Any]) -> str:
    s = r["sizes"]
    history = f", {s['history']} finished jobs in the database first" if s["history"] else ""
    head = (
        f"corral local benchmark: {r['cpus']} CPUs, Python {r['python']}, "
        f"{s['seq']} sequential jobs, {s['jobs']} at once ({FLAVOR}), "
        f"{s['terminates']} terminates{history}; "
        f"CORRAL_HOME under {r['home_parent']} (a mkdir there: {r['mkdir_us']:.0f} us); "
        f"load average before {r['load_before'][0]:.2f}, "
        f"after {r['load_after'][0]:.2f}"
    )
    baseline = (
        'baseline: bare subprocess.Popen of `python -c "print(1)"` (a pool of 2 for '
        "the burst), an idle bare interpreter for memory, SIGTERM of a bare "
        "`sleep 30` for terminate; all measured in this run"
    )
    main = table(("measure", "corral", "baseline", "ratio", "target", "result"), rows(r))
    ray = table(("Ray Jobs (quoted, not measured)", "Ray Jobs", "corral (measured)"), ray_rows(r))
    parts = [head, baseline, main]
    if cpu_rows(r):
        n = r["burst"]["jobs"]
        parts.append(table((f"CPU per job in the {n}-job run", "corral", "baseline"),
                           cpu_rows(r)))
    return "\n\n".join([*parts, ray])


def parse_args(argv: Sequence[str] | None) -> tuple[Sizes, str | None, pathlib.Path]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=500, help="jobs submitted at once")
    p.add_argument("--seq", type=int, default=30, help="sequential jobs timed")
    p.add_argument("--terminates", type=int, default=10, help="running jobs terminated")
    p.add_argument("--history", type=int, default=0,
                   help="finished jobs in the database before measuring (default 0)")
    p.add_argument("--home-parent", type=pathlib.Path, default=DEFAULT_HOME_PARENT,
                   help="make the server's temporary CORRAL_HOME in this directory "
                        f"(default: {DEFAULT_HOME_PARENT}, where corral's default is)")
    p.add_argument("--quick", action="store_true", help="small numbers, for a smoke run")
    p.add_argument("--json", metavar="PATH", help="also write the figures as JSON here")
    a = p.parse_args(argv)
    if a.quick:
        sizes = Sizes(seq=5, warmup=1, jobs=20, terminates=2, history=a.history)
    else:
        sizes = Sizes(seq=a.seq, warmup=3, jobs=a.jobs, terminates=a.terminates,
                      history=a.history)
    return sizes, a.json, a.home_parent


def main(argv: Sequence[str] | None = None) -> int:
    sizes, json_path, home_parent = parse_args(argv)
    results = run_all(sizes, home_parent)
    print(report(results), flush=True)
    if json_path:
        pathlib.Path(json_path).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
