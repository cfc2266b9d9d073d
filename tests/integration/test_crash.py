"""Crash tests: kill -9 a real server process at awkward moments and start it again.

Whatever the moment, the restarted server must converge: every job ends in the right
phase, no task runs twice, none is forgotten, running tasks are re-adopted and tasks that
ended meanwhile get their true exit code (or a clear Lost record when it cannot be known).
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import os
import pathlib
import signal
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import psutil
import pytest
import sqlalchemy as sa

from corral.sdk import credentials
from corral.store import db
from tests import conftest, factories

pytestmark = pytest.mark.slow

TERMINAL = conftest.TERMINAL
SERVE = "from corral import server, settings; server.serve(settings.load())"

# A job that says it started (in the shared file), waits to be released, and says it is done.
# Its first attempt exits with $CODE, any later one with 0; $IGNORE_TERM makes it stubborn.
GATED = """
import os, pathlib, signal, sys, time
shared = pathlib.Path(os.environ["SHARED"])
tag = os.environ["TAG"]
if os.environ.get("IGNORE_TERM"):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
def note(word):
    with open(shared / "lines", "a") as fh:
        fh.write(f"{word} {tag} {os.getpid()}\\n")
note("started")
while not (shared / f"go-{tag}").exists() and not (shared / "go-all").exists():
    time.sleep(0.05)
note("done")
sys.exit(int(os.environ["CODE"]) if os.environ["CORRAL_ATTEMPT"] == "1" else 0)
"""


free_port = factories.free_port


class ServerProcess:
    """`corral server` as its own process (own session), on a fixed home, port and DB."""

    def __init__(self, home: pathlib.Path, db_url: str, *, name: str = "server",
                 env: dict[str, str] | None = None) -> None:
        self.home = home
        self.db_url = db_url
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = home.parent / f"{name}.log"
        self.env = env or {}  #: more of the server's environment
        self.proc: subprocess.Popen[bytes] | None = None
        self.http = httpx.Client(base_url=self.url, timeout=30)
        self.project_id = ""
        self.starts = 0

    def start(self) -> None:
        env = {
            **os.environ,
            "CORRAL_HOME": str(self.home),
            "CORRAL_PORT": str(self.port),
            "CORRAL_DATABASE_URL": self.db_url,
            "CORRAL_TICK_INTERVAL": "0.2",
            "CORRAL_GRACE_PERIOD": "1",
            "CORRAL_CPUS": "2",
            "CORRAL_METRICS_INTERVAL": "0.5",
            **self.env,
        }
        with self.log.open("ab") as out:
            out.write(f"--- start {self.starts}\n".encode())
            out.flush()
            self.proc = subprocess.Popen(
                [sys.executable, "-c", SERVE],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.starts += 1
        factories.wait_for(self._healthy, 30, f"the server to answer (log: {self.log})")
        # The first start wrote the admin's credential into the home; later starts keep it.
        login = credentials.read(self.home / "credentials.json")
        assert login is not None and login.token
        self.http.headers["X-Auth-Token"] = login.token
        self.project_id = login.project_id

    def _healthy(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"server exited: {self.log.read_text()[-3000:]}")
        if not factories.listens(self.proc.pid, self.port):
            return False  # (not yet; or another process holds the port: it exits soon)
        try:
            return self.http.get("/healthz").status_code == 200
        except httpx.TransportError:
            return False

    def kill(self) -> None:
        """kill -9 the server (its whole process group); the jobs live in their own."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        self.proc = None

    def path(self, rest: str) -> str:
        return f"/v2/{self.project_id}{rest}"

    def submit(self, body: dict[str, Any]) -> str:
        r = self.http.post(self.path("/training-jobs"), json=body)
        assert r.status_code == 201, r.text
        return str(r.json()["metadata"]["id"])

    def job(self, job_id: str) -> dict[str, Any]:
        r = self.http.get(self.path(f"/training-jobs/{job_id}"))
        assert r.status_code == 200, r.text
        return dict(r.json())

    def phase(self, job_id: str) -> str:
        return str(self.job(job_id)["status"]["phase"])

    def wait(self, job_id: str, timeout: float = 30.0) -> dict[str, Any]:
        return dict(
            factories.wait_for(
                lambda: (j := self.job(job_id))["status"]["phase"] in TERMINAL and j,
                timeout,
                f"job {job_id} to finish",
            )
        )

    def all_jobs(self) -> list[dict[str, Any]]:
        r = self.http.post(self.path("/training-job-searches"), json={"limit": 50})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["count"] <= 50
        return list(body["items"])


@pytest.fixture
def shared(tmp_path: pathlib.Path) -> pathlib.Path:
    """Outside corral's home: where jobs note when they start and end."""
    path = tmp_path / "shared"
    path.mkdir()
    return path


@pytest.fixture
def corral(tmp_path: pathlib.Path, db_url: str, shared: pathlib.Path) -> Iterator[ServerProcess]:
    srv = ServerProcess(tmp_path / "home", db_url)
    try:
        yield srv
    finally:
        srv.kill()
        srv.http.close()
        kill_jobs(db_url, shared)


def kill_jobs(db_url: str, shared: pathlib.Path) -> None:
    """Test hygiene: no process any job started outlives the test."""
    (shared / "go-all").touch()
    for _word, _tag, pid in read_lines(shared):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    store = db.Store(db_url)
    # The schema does not exist if the server never got as far as migrating it.
    try:
        with contextlib.suppress(sa.exc.SQLAlchemyError):
            conftest.kill_leftovers(store)
    finally:
        store.dispose()


def read_lines(shared: pathlib.Path) -> list[tuple[str, str, int]]:
    path = shared / "lines"
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        word, tag, pid = line.split()
        out.append((word, tag, int(pid)))
    return out


def started(shared: pathlib.Path) -> dict[str, list[int]]:
    """tag -> pids of every start of that job's task."""
    out: dict[str, list[int]] = collections.defaultdict(list)
    for word, tag, pid in read_lines(shared):
        if word == "started":
            out[tag].append(pid)
    return out


def finished(shared: pathlib.Path) -> dict[str, list[int]]:
    out: dict[str, list[int]] = collections.defaultdict(list)
    for word, tag, pid in read_lines(shared):
        if word == "done":
            out[tag].append(pid)
    return out


def gated_job(
    tmp_path: pathlib.Path,
    shared: pathlib.Path,
    tag: str,
    code: int = 0,
    *,
    ignore_term: bool = False,
    **overrides: Any,
) -> dict[str, Any]:
    code_dir = tmp_path / "code"
    if not code_dir.exists():
        code_dir.mkdir()
        (code_dir / "train.py").write_text(GATED)
    env = {"SHARED": str(shared), "TAG": tag, "CODE": str(code)}
    if ignore_term:
        env["IGNORE_TERM"] = "1"
    return factories.make_job(name=tag, code_dir=code_dir, environments=env, **overrides)


# --- the tests --------------------------------------------------------------------------


def submit_started(corral: ServerProcess, tmp_path: pathlib.Path, shared: pathlib.Path,
                   tag: str, **kw: Any) -> tuple[str, int]:
    """Submit a gated job and wait until it has started: (its id, its task's pid)."""
    job_id = corral.submit(gated_job(tmp_path, shared, tag, **kw))
    pid = factories.wait_for(lambda: started(shared).get(tag), what="the job to start")[0]
    return job_id, pid


def test_kill_9_while_jobs_run_and_queue(
    corral: ServerProcess, tmp_path: pathlib.Path, shared: pathlib.Path
) -> None:
    corral.start()
    seven = corral.submit(gated_job(tmp_path, shared, "seven", code=7))
    workers = {f"w{i}": corral.submit(gated_job(tmp_path, shared, f"w{i}")) for i in range(5)}
    factories.wait_for(lambda: set(started(shared)) == {"seven", "w0"}, what="two jobs to start")

    corral.kill()  # seven and w0 run, w1..w4 queue
    (shared / "go-seven").touch()
    seven_pid = started(shared)["seven"][0]
    factories.wait_for(
        lambda: not factories.alive(seven_pid), 10, "seven to exit while the server is down"
    )
    corral.start()

    job = corral.wait(seven)
    assert job["status"]["phase"] == "Failed"
    assert job["status"]["task_statuses"][0]["exit_code"] == 7
    assert job["status"]["running_records"][-1]["end_reason"] == "exit with 7"
    factories.wait_for(lambda: set(started(shared)) == {"seven", "w0", "w1"}, what="w1 to start")

    corral.kill()  # a second crash: w0 and w1 run, w2..w4 queue
    corral.start()
    (shared / "go-all").touch()

    jobs = {tag: corral.wait(job_id) for tag, job_id in workers.items()}
    assert {tag: j["status"]["phase"] for tag, j in jobs.items()} == dict.fromkeys(
        workers, "Completed"
    )
    starts, ends = started(shared), finished(shared)
    assert {tag: len(pids) for tag, pids in starts.items()} == dict.fromkeys(["seven", *workers], 1)
    # re-adopted, not restarted: the process that started each job is the one that finished
    assert {tag: ends[tag] for tag in workers} == {tag: starts[tag] for tag in workers}
    for tag in ("w0", "w1"):
        records = jobs[tag]["status"]["running_records"]
        assert [r["end_reason"] for r in records] == ["job completed"]
        assert jobs[tag]["status"]["task_statuses"][0]["exit_code"] == 0


def test_a_task_that_vanished_while_the_server_was_down_is_lost(
    corral: ServerProcess, tmp_path: pathlib.Path, shared: pathlib.Path
) -> None:
    corral.start()
    job_id, pid = submit_started(corral, tmp_path, shared, "vanish")

    corral.kill()
    # Its keeper first (its parent, which would record the exit code), then the task: the
    # launcher kills what a killed keeper leaves at once, so it may be gone already.
    keeper = psutil.Process(pid).ppid()
    os.kill(keeper, signal.SIGKILL)
    factories.wait_for(lambda: not factories.alive(keeper), 10, "the keeper to die")
    with contextlib.suppress(ProcessLookupError):
        os.killpg(os.getpgid(pid), signal.SIGKILL)
    factories.wait_for(lambda: not factories.alive(pid), 10, "the task to die")
    corral.start()

    job = corral.wait(job_id)
    assert (job["status"]["phase"], job["status"]["secondary_phase"]) == ("Abnormal", "Lost")
    assert job["status"]["running_records"][-1]["end_reason"] == "lost"
    assert job["status"]["task_statuses"][0].get("exit_code") is None
    assert job["status"]["task_statuses"][0]["message"]
    assert started(shared)["vanish"] == [pid]


def test_a_task_killed_while_the_server_was_down_keeps_its_true_exit_code(
    corral: ServerProcess, tmp_path: pathlib.Path, shared: pathlib.Path
) -> None:
    corral.start()
    job_id, pid = submit_started(corral, tmp_path, shared, "shot")

    corral.kill()
    os.killpg(os.getpgid(pid), signal.SIGKILL)  # its launcher lives on and records 137
    factories.wait_for(lambda: not factories.alive(pid), 10, "the task to die")
    corral.start()

    job = corral.wait(job_id)
    assert (job["status"]["phase"], job["status"]["secondary_phase"]) == ("Failed", "Failed")
    assert job["status"]["task_statuses"][0]["exit_code"] == 128 + signal.SIGKILL
    assert job["status"]["running_records"][-1]["end_reason"] == "exit with 137"


def test_a_failure_while_the_server_was_down_is_retried_once(
    corral: ServerProcess, tmp_path: pathlib.Path, shared: pathlib.Path
) -> None:
    corral.start()
    job_id, first = submit_started(corral, tmp_path, shared, "flaky", code=1, retries=1,
                                   fault_tolerance={"backoff": {"initial": 0}})

    corral.kill()
    (shared / "go-flaky").touch()
    factories.wait_for(lambda: not factories.alive(first), 10, "the first attempt to fail")
    corral.start()

    job = corral.wait(job_id)
    assert job["status"]["phase"] == "Completed"
    records = job["status"]["running_records"]
    assert [(r["end_reason"], r.get("end_recover")) for r in records] == [
        ("exit with 1", "proc_restart"),
        ("job completed", None),
    ]
    assert len(started(shared)["flaky"]) == 2  # one per attempt, never more
    assert started(shared)["flaky"][0] == first


def test_terminate_survives_a_crash(
    corral: ServerProcess, tmp_path: pathlib.Path, shared: pathlib.Path
) -> None:
    corral.start()
    job_id, pid = submit_started(corral, tmp_path, shared, "stubborn", ignore_term=True)
    r = corral.http.post(
        corral.path(f"/training-jobs/{job_id}/actions"), json={"action_type": "terminate"}
    )
    assert r.status_code == 202, r.text

    corral.kill()  # while it is Terminating: SIGTERM sent or about to be, SIGKILL not yet
    corral.start()

    job = corral.wait(job_id)
    assert job["status"]["phase"] == "Terminated"
    assert not factories.alive(pid)
    assert started(shared)["stubborn"] == [pid]


def test_a_job_deleted_before_a_crash_is_gone_after_it(
    corral: ServerProcess, tmp_path: pathlib.Path, shared: pathlib.Path
) -> None:
    corral.start()
    job_id, pid = submit_started(corral, tmp_path, shared, "doomed")
    r = corral.http.delete(corral.path(f"/training-jobs/{job_id}"))
    assert r.status_code == 202, r.text

    corral.kill()
    corral.start()

    factories.wait_for(lambda: not factories.alive(pid), 10, "the job's process to be stopped")
    run_dir = corral.home / "runs" / job_id
    factories.wait_for(lambda: not run_dir.exists(), 10, "the run directory to be removed")
    assert corral.http.get(corral.path(f"/training-jobs/{job_id}")).status_code == 404
    assert corral.all_jobs() == []


def test_kill_9_during_a_burst_of_submissions(corral: ServerProcess, shared: pathlib.Path) -> None:
    corral.start()
    names = [f"burst-{i:02d}" for i in range(24)]
    line = '"$SHARED/lines"'
    command = (
        f'echo "started $CORRAL_JOB_ID $$" >> {line}; sleep 0.1; '
        f'echo "done $CORRAL_JOB_ID $$" >> {line}; true'
    )

    def body(name: str) -> dict[str, Any]:
        return factories.make_job(name=name, command=command, environments={"SHARED": str(shared)})

    def submit(name: str) -> tuple[str, str | None]:
        try:
            r = corral.http.post(corral.path("/training-jobs"), json=body(name))
        except httpx.TransportError:
            return name, None
        return name, r.json()["metadata"]["id"] if r.status_code == 201 else None

    accepted: dict[str, str] = {}
    unanswered: list[str] = []
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        for fut in concurrent.futures.as_completed([pool.submit(submit, n) for n in names]):
            name, job_id = fut.result()
            if job_id is None:
                unanswered.append(name)
            else:
                accepted[name] = job_id
            if len(accepted) == 8 and corral.proc is not None:
                corral.kill()
    assert unanswered, "the server was killed after every submission had been answered"
    corral.start()

    # A client retrying what it got no answer for: created now, or already there from
    # before the crash, never twice.
    for name in unanswered:
        r = corral.http.post(corral.path("/training-jobs"), json=body(name))
        assert r.status_code == 201 or r.json()["error_code"] == "ModelArts.2751", r.text

    known = {j["metadata"]["name"]: j["metadata"]["id"] for j in corral.all_jobs()}
    assert sorted(known) == names
    assert {n: known[n] for n in accepted} == accepted  # nothing accepted was forgotten
    final = {name: corral.wait(job_id) for name, job_id in known.items()}
    assert {n: j["status"]["phase"] for n, j in final.items()} == dict.fromkeys(names, "Completed")
    starts = started(shared)
    assert {job_id: len(starts[job_id]) for job_id in known.values()} == dict.fromkeys(
        known.values(), 1
    )
    assert set(starts) == set(known.values())  # nothing ran that corral does not know of


# --- fault tolerance: a backoff, and the stops of a hung job and of one out of time ----


# A task that says it started, ignores SIGTERM, and then neither writes nor computes.
SILENT = """
import os, pathlib, signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
with open(pathlib.Path(os.environ["SHARED"]) / "lines", "a") as fh:
    fh.write(f"started {os.environ['TAG']} {os.getpid()}\\n")
time.sleep(600)
"""


def test_a_backoff_survives_a_crash(
    corral: ServerProcess, tmp_path: pathlib.Path, shared: pathlib.Path
) -> None:
    corral.start()
    job_id, _ = submit_started(corral, tmp_path, shared, "backoff", code=1, retries=1,
                               fault_tolerance={"backoff": {"initial": 3}})
    (shared / "go-backoff").touch()
    factories.wait_for(lambda: corral.job(job_id)["status"].get("restart_at"),
                       what="the failed attempt's backoff")

    corral.kill()  # while it waits out its backoff
    corral.start()

    job = corral.wait(job_id)
    assert job["status"]["phase"] == "Completed"
    assert [(r["end_reason"], r.get("end_recover"), r.get("failure_class"))
            for r in job["status"]["running_records"]] == [
        ("exit with 1", "proc_restart", "user_exit"), ("job completed", None, None)]
    assert len(started(shared)["backoff"]) == 2  # one per attempt, never more


def test_the_stops_of_a_hung_job_and_of_one_out_of_time_survive_a_crash(
    corral: ServerProcess, tmp_path: pathlib.Path, shared: pathlib.Path
) -> None:
    code = factories.write_code(tmp_path, SILENT)
    ids: dict[str, str] = {}
    corral.start()
    for tag, ft in (("hung", {"hang_timeout": 1}), ("late", {"max_run_time": 2,
                                                             "hang_timeout": 0})):
        ids[tag] = corral.submit(factories.make_job(
            name=tag, code_dir=code, retries=2, fault_tolerance=ft,
            environments={"SHARED": str(shared), "TAG": tag}))

    def stopping() -> bool:
        return all((corral.job(j)["status"].get("reason") or "").endswith("stopping it")
                   for j in ids.values())

    factories.wait_for(stopping, what="both jobs to be stopped")
    corral.kill()  # the stops decided; SIGTERM (ignored) sent or not, SIGKILL not yet
    corral.start()

    hung, late = corral.wait(ids["hung"]), corral.wait(ids["late"])
    assert (hung["status"]["phase"], hung["status"]["failure_class"],
            hung["status"]["reason"]) == ("Failed", "hang", "hanged")
    assert (late["status"]["phase"], late["status"]["failure_class"]) == ("Failed", "timeout")
    starts = started(shared)
    assert {tag: len(starts[tag]) for tag in ids} == {"hung": 1, "late": 1}
    assert not any(factories.alive(pid) for tag in ids for pid in starts[tag])
