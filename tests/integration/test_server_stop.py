"""`corral server` stopped by SIGTERM (systemd, Docker, Kubernetes) or Ctrl-C: a graceful
stop, not a death by the signal. The platform stops, the leadership lease is given up,
"corral stopped" is logged, the command exits 0, and the jobs still running are left
running for the next server to adopt (real server processes, real jobs)."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest

from corral.services import leasing
from corral.store import db
from tests import factories
from tests.integration import test_crash as crash
from tests.integration import test_ha as ha

pytestmark = pytest.mark.slow

#: `corral server`, the command itself (its click entry point, as the console script runs it)
CLI = "import sys; from corral.cli import main; sys.argv = ['corral', 'server']; main.main()"


@pytest.fixture(autouse=True)
def the_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(crash, "SERVE", CLI)


@pytest.fixture
def shared(tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / "shared"
    path.mkdir()
    return path


@pytest.fixture
def corral(tmp_path: pathlib.Path, db_url: str, shared: pathlib.Path,
           ) -> Iterator[crash.ServerProcess]:
    srv = crash.ServerProcess(tmp_path / "home", db_url)
    try:
        yield srv
    finally:
        srv.kill()
        srv.http.close()
        crash.kill_jobs(db_url, shared)


def stop(srv: crash.ServerProcess, sig: signal.Signals) -> int:
    """Send the server process (only it, as a process manager does) `sig`; its exit
    status once it has exited."""
    assert srv.proc is not None
    os.kill(srv.proc.pid, sig)
    status = srv.proc.wait(60)
    srv.proc = None
    return status


def test_sigterm_stops_the_server_gracefully_and_its_running_job_is_adopted_next_start(
        corral: crash.ServerProcess, tmp_path: pathlib.Path, shared: pathlib.Path) -> None:
    corral.start()
    job_id, pid = crash.submit_started(corral, tmp_path, shared, "on")

    assert stop(corral, signal.SIGTERM) == 0

    assert "corral stopped on SIGTERM" in corral.log.read_text()
    assert factories.alive(pid), "the job's process was stopped with the server"
    corral.start()
    (shared / "go-on").touch()
    job = corral.wait(job_id)
    assert job["status"]["phase"] == "Completed", job["status"]
    # adopted, not started again: the process that started it is the one that finished
    assert crash.started(shared)["on"] == crash.finished(shared)["on"] == [pid]
    assert f"adopted {job_id}/worker-0 pid {pid}" in corral.log.read_text()


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_ctrl_c_stops_the_server_gracefully_too(corral: crash.ServerProcess) -> None:
    corral.start()

    assert stop(corral, signal.SIGINT) == 0

    log = corral.log.read_text()
    assert "corral stopped on SIGINT" in log
    assert "Traceback" not in log and "Aborted" not in log


def test_a_leader_stopped_by_sigterm_gives_up_its_lease_and_a_standby_adopts_its_job(
        tmp_path: pathlib.Path, pg_url: str) -> None:
    # A lease far longer than the test waits: only a lease given up lets the standby lead.
    with ha.pair(tmp_path, pg_url, pg_url, CORRAL_LEADER_LEASE="120") as p:
        epoch, leader = factories.wait_for(p.leader, 30, "a leader")
        [standby] = [s for s in p.servers if s is not leader]
        (tmp_path / "gated").mkdir()  # (the pair's code folder holds another job)
        job_id = leader.submit(crash.gated_job(tmp_path / "gated", p.shared, "on"))
        pid = factories.wait_for(lambda: crash.started(p.shared).get("on"),
                                 what="the job to start")[0]

        assert stop(leader, signal.SIGTERM) == 0

        assert "corral stopped on SIGTERM" in leader.log.read_text()
        assert given_up(pg_url, leader, epoch), "the stopped leader kept its lease"
        _, new_leader = factories.wait_for(
            lambda: (now := p.leader()) is not None and now[0] > epoch and now, 30,
            "the standby to lead")
        assert new_leader is standby
        assert factories.alive(pid), "the job's process was stopped with the server"
        (p.shared / "go-on").touch()
        job = standby.wait(job_id)
        assert job["status"]["phase"] == "Completed", job["status"]
        assert crash.started(p.shared)["on"] == crash.finished(p.shared)["on"] == [pid]


def given_up(db_url: str, leader: crash.ServerProcess, epoch: int) -> bool:
    """Whether the lease `leader` held in `epoch` is over: ended by it, or taken over (a
    standby could not have taken it over before it expired, but for its being given up)."""
    store = db.Store(db_url)
    try:
        lease, now = leasing.current(store)
    finally:
        store.dispose()
    if lease.epoch > epoch:
        return True
    return (lease.url, lease.epoch) == (leader.url, epoch) and lease.expires_at <= now


def test_a_sigterm_as_the_platform_starts_is_a_graceful_stop_too(
        tmp_path: pathlib.Path, db_url: str) -> None:
    # The signal comes the moment the platform has started (taken its lease, started its
    # threads), before uvicorn serves: the window in which it used to end the process
    # with the lease kept and nothing logged.
    script = ("import os, signal\n"
              "from corral import running\n"
              "start = running.Platform.start\n"
              "def start_then_term(self):\n"
              "    start(self)\n"
              "    os.kill(os.getpid(), signal.SIGTERM)\n"
              "running.Platform.start = start_then_term\n" + CLI)
    env = {**os.environ, "CORRAL_HOME": str(tmp_path / "home"), "CORRAL_PORT": "0",
           "CORRAL_DATABASE_URL": db_url}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=60)

    assert done.returncode == 0, done.stdout + done.stderr
    assert "corral stopped on SIGTERM" in done.stdout + done.stderr
    store = db.Store(db_url)
    try:
        lease, now = leasing.current(store)
    finally:
        store.dispose()
    assert lease.expires_at <= now, "the server kept its lease"
