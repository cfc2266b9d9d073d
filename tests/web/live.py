"""A real `corral server` in a process of its own, for the console's end-to-end tests,
and what the tests put into it (jobs, a long history, a big log) through its API or, for
the history, straight into its database as benchmarks/bench_local.py does."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pathlib
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import sqlalchemy as sa

from corral.sdk import credentials
from corral.storage import runs
from corral.store import db, schema
from tests import conftest, factories

TERMINAL = conftest.TERMINAL


def py(source: str) -> str:
    """A job command running `source` with this interpreter."""
    return f"{shlex.quote(sys.executable)} -c {shlex.quote(source)}"


#: prints a numbered line and a metric every `pause` seconds, `n` times
CHATTY = """
import sys, time
n, pause = int(sys.argv[1]), float(sys.argv[2])
for i in range(n):
    print(f"step {i}: training on batch {i}", flush=True)
    print(f"corral:metrics step={i} loss={1 / (1 + i):.4f} accuracy={i / (i + 5):.4f}", flush=True)
    time.sleep(pause)
"""


def chatty(n: int, pause: float) -> str:
    return py(CHATTY) + f" {n} {pause}"


@dataclasses.dataclass
class Server:
    proc: subprocess.Popen[bytes]
    home: pathlib.Path
    url: str
    db_url: str
    project_id: str
    token: str
    user: str
    http: httpx.Client
    log: pathlib.Path

    def path(self, rest: str, project_id: str | None = None) -> str:
        return f"/v2/{project_id or self.project_id}{rest}"

    def ok(self, method: str, path: str, status: int = 200, **kw: Any) -> Any:
        r = self.http.request(method, path, **kw)
        assert r.status_code == status, f"{method} {path}: {r.status_code} {r.text}"
        return r.json() if r.content else None

    def submit(self, body: dict[str, Any], project_id: str | None = None) -> str:
        return str(self.ok("POST", self.path("/training-jobs", project_id), 201,
                           json=body)["metadata"]["id"])

    def job(self, job_id: str, project_id: str | None = None) -> dict[str, Any]:
        return dict(self.ok("GET", self.path(f"/training-jobs/{job_id}", project_id)))

    def wait(self, job_id: str, phases: set[str] | None = None, timeout: float = 60,
             project_id: str | None = None) -> dict[str, Any]:
        want = phases or TERMINAL
        return dict(factories.wait_for(
            lambda: (j := self.job(job_id, project_id))["status"]["phase"] in want and j,
            timeout, f"job {job_id} to be {want}"))

    def project(self, name: str) -> str:
        """A new project, the admin a member of it (as every platform admin is)."""
        return str(self.ok("POST", "/corral/projects", 201, json={"name": name})["project_id"])

    def log_path(self, job_id: str, attempt: int = 1, task: str = "worker-0") -> pathlib.Path:
        return runs.RunPaths(self.home / "runs", job_id).log_path(attempt, task)


free_port = factories.free_port


def start(home: pathlib.Path, db_url: str | None = None, **settings: Any) -> Server:
    """`corral server` with a fresh CORRAL_HOME (and database), fast ticks and samples."""
    home.mkdir(parents=True, exist_ok=True)
    port = free_port()
    env = {**os.environ, "CORRAL_HOME": str(home), "CORRAL_PORT": str(port),
           "CORRAL_NOTEBOOK_PORT": str(free_port()),
           "CORRAL_HOST": "127.0.0.1", "CORRAL_TICK_INTERVAL": "0.2",
           "CORRAL_METRICS_INTERVAL": "0.3", "CORRAL_STORAGE_INTERVAL": "0.3",
           "CORRAL_GRACE_PERIOD": "1", "CORRAL_DISK_RESERVE_MB": "0",
           **{f"CORRAL_{k.upper()}": str(v) for k, v in settings.items()}}
    if db_url:
        env["CORRAL_DATABASE_URL"] = db_url
    log = home.parent / f"server-{port}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-c", "from corral.cli.main import main; main()",
                                 "server"], env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(proc, port, log)
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        raise
    login = credentials.read(home / "credentials.json")
    assert login is not None and login.token, "the server wrote no credential"
    http = conftest.http_client(url, login.token)
    return Server(proc=proc, home=home, url=url, db_url=db_url or f"sqlite:///{home / 'corral.db'}",
                  project_id=login.project_id, token=login.token, user=login.user, http=http,
                  log=log)


def _wait_healthy(proc: subprocess.Popen[bytes], port: int, log: pathlib.Path) -> None:
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the server exited with {proc.returncode}:\n"
                                 + log.read_text(errors="replace")[-4000:])
        # (the server itself listening on its port: not another that took the port first)
        with contextlib.suppress(httpx.HTTPError):
            if factories.listens(proc.pid, port) and \
                    httpx.get(url + "/healthz", timeout=2).status_code == 200:
                return
        time.sleep(0.1)
    raise AssertionError("the server did not answer /healthz within 60 s")


def stop(srv: Server) -> None:
    """SIGTERM the server; kill the tasks it leaves running (they outlive it, by design)."""
    srv.http.close()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(srv.proc.pid, signal.SIGTERM)
    try:
        srv.proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(srv.proc.pid, signal.SIGKILL)
        srv.proc.wait()
    store = db.Store(srv.db_url)
    try:
        conftest.kill_leftovers(store)
    finally:
        store.dispose()


@contextlib.contextmanager
def running(home: pathlib.Path, db_url: str | None = None, **settings: Any) -> Iterator[Server]:
    srv = start(home, db_url, **settings)
    try:
        yield srv
    finally:
        stop(srv)


# --- what the tests put in ------------------------------------------------------------------


def add_history(srv: Server, project_id: str, n: int) -> None:
    """`n` finished jobs in a project, as after months of use: one job is run, then its row
    is copied n - 1 times (new id, name and number) in one statement, server running."""
    job_id = srv.submit(factories.make_job(name="history", command="true"), project_id)
    srv.wait(job_id, {"Completed"}, project_id=project_id)
    engine = sa.create_engine(srv.db_url)
    try:
        cols = [c.name for c in schema.jobs.columns]
        # a job of its own family each (versions are made on first look), a minute apart
        made = {"id": "substr(id, 1, 24) || '-' || x.n", "name": "name || '-' || x.n",
                "seq": "seq + x.n", "create_time": "create_time - x.n * CAST(60000 AS BIGINT)",
                "family_id": "NULL", "version": "NULL"}
        picked = ", ".join(made.get(c, c) for c in cols)
        with engine.begin() as conn:
            conn.execute(sa.text(
                f"WITH RECURSIVE x(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM x "
                f"WHERE n < {n - 1}) INSERT INTO jobs ({', '.join(cols)}) "
                f"SELECT {picked} FROM jobs, x WHERE jobs.id = :job"), {"job": job_id})
            if engine.dialect.name == "postgresql":  # the next job's number follows them
                conn.execute(sa.text("SELECT setval('jobs_seq_seq', (SELECT max(seq) FROM jobs))"))
        # the planner's statistics, as a database that grew over months has them
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(sa.text("ANALYZE jobs"))
    finally:
        engine.dispose()


def grow_log(path: pathlib.Path, size: int, head: bytes, tail: bytes) -> None:
    """Make the log `size` bytes: `head` at its start, `tail` at its end, and between them
    a hole of NUL bytes the file system does not store (a sparse file)."""
    with open(path, "r+b") as fh:
        fh.seek(0)
        fh.write(head)
        fh.truncate(size - len(tail))
        fh.seek(size - len(tail))
        fh.write(tail)
