"""High availability (docs/high-availability.md): two real servers on one PostgreSQL
database (directly, and through PgBouncer in transaction mode), the leader killed with
SIGKILL at random moments again and again: every job ends right, none runs twice, and
another server leads within seconds each time. And SQLite stays one server's.

The chaos tests print their seed; CORRAL_CHAOS_SEED=<seed> runs one again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pathlib
import random
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from corral import server
from corral.domain import leadership
from corral.services import leasing
from corral.store import db
from tests import factories
from tests.conftest import make_settings
from tests.integration import test_crash as crash


def test_a_second_server_on_one_sqlite_database_refuses_to_start_and_says_why(
        tmp_path: pathlib.Path) -> None:
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    first = server.build(make_settings(tmp_path / "a", database_url=url))
    try:
        with pytest.raises(server.AlreadyRunning,
                           match=r"SQLite serves one server at a time.*PostgreSQL"):
            server.build(make_settings(tmp_path / "b", database_url=url))
    finally:
        first.stop()
    server.build(make_settings(tmp_path / "b", database_url=url)).stop()  # once it is gone


def test_a_second_server_on_one_sqlite_home_says_why(tmp_path: pathlib.Path) -> None:
    first = server.build(make_settings(tmp_path / "home"))
    try:
        with pytest.raises(server.AlreadyRunning, match="SQLite database serves one server"):
            server.build(make_settings(tmp_path / "home"))
    finally:
        first.stop()


# --- chaos: two servers on PostgreSQL, the leader killed again and again ----------------

JOB = """
import os, pathlib, time
shared = pathlib.Path(os.environ["SHARED"])
def note(word):
    with open(shared / "lines", "a") as fh:
        fh.write(f"{word} {os.environ['TAG']} {os.getpid()}\\n")
note("started")
time.sleep(float(os.environ["SECONDS"]))
note("done")
"""
#: how long a failover may take: the lease's end plus a standby's next try is 12 s with the
#: default times; this is the issue's promise, with room for a slow machine
FAILOVER_LIMIT_S = 15.0


@dataclasses.dataclass
class Pair:
    """Two `corral server`s on one database and one home, named apart."""

    servers: list[crash.ServerProcess]
    db_url: str  #: the database itself (not through a pooler): the test reads the lease
    shared: pathlib.Path
    code: pathlib.Path

    def leader(self) -> tuple[int, crash.ServerProcess] | None:
        """The epoch and the server holding an unexpired lease, if any."""
        store = db.Store(self.db_url)
        try:
            lease, now = leasing.current(store)
        finally:
            store.dispose()
        if lease.holder is None or lease.expires_at <= now:
            return None
        [srv] = [s for s in self.servers if s.url == lease.url]
        return lease.epoch, srv

    def submit(self, srv: crash.ServerProcess, tag: str, seconds: float) -> str:
        return srv.submit(factories.make_job(
            name=tag, code_dir=self.code,
            environments={"SHARED": str(self.shared), "TAG": tag, "SECONDS": str(seconds)}))


@contextlib.contextmanager
def pair(tmp_path: pathlib.Path, db_url: str, serve_url: str,
         **env: str) -> Iterator[Pair]:
    shared = tmp_path / "shared"
    shared.mkdir()
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text(JOB)
    env = {"CORRAL_CPUS": "4", **env}
    # (PGAPPNAME: each server's sessions are told apart in pg_stat_activity)
    servers = [crash.ServerProcess(tmp_path / "home", serve_url, name=f"ha-{n}",
                                   env={"CORRAL_SERVER_NAME": f"ha-{n}", "PGAPPNAME": f"ha-{n}",
                                        **env})
               for n in "ab"]
    try:
        for srv in servers:  # (one after the other: the first migrates the database)
            srv.start()
        yield Pair(servers, db_url, shared, code)
    finally:
        for srv in servers:
            srv.kill()
            srv.http.close()
        crash.kill_jobs(db_url, shared)


def chaos(p: Pair, *, kills: int, per_round: int, seed: int) -> list[float]:
    """Submit jobs to both servers, kill -9 the leader at a random moment (launching,
    running), wait for the other to lead, start the killed one again as a standby; then
    every job must complete, each task having started once. The failover times."""
    print(f"chaos seed {seed}")
    rng = random.Random(seed)
    jobs: dict[str, str] = {}
    failovers = []
    for n in range(kills):
        epoch, leader = factories.wait_for(p.leader, 30, "a leader")
        for i in range(per_round):
            tag = f"r{n}j{i}"
            jobs[tag] = p.submit(rng.choice(p.servers), tag, rng.uniform(0.2, 2.5))
        time.sleep(rng.uniform(0.0, 1.5))
        leader.kill()
        killed_at = time.monotonic()
        _, successor = factories.wait_for(
            lambda: (now := p.leader()) is not None and now[0] > epoch and now, 30,  # noqa: B023
            "another server to lead")
        failovers.append(time.monotonic() - killed_at)
        assert successor is not leader
        leader.start()  # back, as a standby, and says who leads
        said = leader.http.get("/corral/info").json()["leader"]
        assert (said["url"], said["this_server"]) == (successor.url, False)
    print("failovers (s):", ", ".join(f"{t:.1f}" for t in failovers))
    any_server = p.servers[0]
    ended = {tag: any_server.wait(job_id, 60) for tag, job_id in jobs.items()}
    assert {tag: j["status"]["phase"] for tag, j in ended.items()} == dict.fromkeys(
        jobs, "Completed")
    starts, done = crash.started(p.shared), crash.finished(p.shared)
    assert {tag: len(starts[tag]) for tag in jobs} == dict.fromkeys(jobs, 1), "a task ran twice"
    assert {tag: len(done[tag]) for tag in jobs} == dict.fromkeys(jobs, 1)
    assert max(failovers) < FAILOVER_LIMIT_S, failovers
    return failovers


@pytest.mark.slow
def test_killing_the_leader_again_and_again_starts_no_job_twice(
        tmp_path: pathlib.Path, pg_url: str) -> None:
    with pair(tmp_path, pg_url, pg_url) as p:
        chaos(p, kills=3, per_round=4, seed=int(os.environ.get("CORRAL_CHAOS_SEED",
                                                                random.randrange(10**6))))


def test_a_follower_serves_submit_show_logs_and_stop(tmp_path: pathlib.Path,
                                                      pg_url: str) -> None:
    with pair(tmp_path, pg_url, pg_url) as p:
        _, leader = factories.wait_for(p.leader, 30, "a leader")
        [follower] = [s for s in p.servers if s is not leader]
        said = follower.http.get("/corral/info").json()["leader"]
        assert (said["url"], said["this_server"]) == (leader.url, False)

        job_id = p.submit(follower, "long", 300)  # submitted to the follower ...
        factories.wait_for(lambda: crash.started(p.shared).get("long"), 30,
                           "the leader to start it")  # ... started by the leader
        logs = f"/training-jobs/{job_id}/tasks/worker-0/logs"
        assert follower.http.get(follower.path(logs)).status_code == 200
        r = follower.http.post(follower.path(f"/training-jobs/{job_id}/actions"),
                               json={"action_type": "terminate"})
        assert r.status_code in (200, 202), r.text
        ended = follower.wait(job_id, 30)  # the stop reached the leader's task
        assert ended["status"]["phase"] == "Terminated", ended["status"]
        pid = crash.started(p.shared)["long"][0]
        factories.wait_for(lambda: not factories.alive(pid), 10, "its process to be gone")
        assert not crash.finished(p.shared).get("long")


def pgbouncer_binary() -> str:
    path = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
    if not os.path.exists(path):
        if os.environ.get("CI") == "true":
            pytest.fail("pgbouncer is not installed and CI=true")
        pytest.skip("pgbouncer is not installed (apt-get install pgbouncer)")
    return path


@contextlib.contextmanager
def pgbouncer(pg_url: str) -> Iterator[str]:
    """PgBouncer in transaction mode on a free loopback port, before the test's PostgreSQL:
    the URL to reach the test's database through it."""
    binary = pgbouncer_binary()
    # (a folder of its own under /tmp: run as root, it drops to `nobody`, who must reach it)
    with tempfile.TemporaryDirectory(prefix="corral-pgbouncer-") as where:
        folder = pathlib.Path(where)
        folder.chmod(0o755)
        with _pgbouncer(binary, folder, pg_url) as url:
            yield url


@contextlib.contextmanager
def _pgbouncer(binary: str, folder: pathlib.Path, pg_url: str) -> Iterator[str]:
    port = crash.free_port()
    target = sa.engine.make_url(pg_url)
    (folder / "users.txt").write_text(f'"{target.username}" ""\n')
    (folder / "pgbouncer.ini").write_text(
        f"[databases]\n* = host={target.host} port={target.port or 5432}\n"
        f"[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {port}\nauth_type = trust\n"
        f"auth_file = {folder / 'users.txt'}\npool_mode = transaction\n"
        "max_client_conn = 500\ndefault_pool_size = 40\nunix_socket_dir =\n"
        f"logfile = {folder / 'pgbouncer.log'}\n")
    (folder / "pgbouncer.log").touch()
    (folder / "pgbouncer.log").chmod(0o666)
    as_user = ["-u", "nobody"] if os.geteuid() == 0 else []  # it refuses to run as root
    proc = subprocess.Popen([binary, *as_user, str(folder / "pgbouncer.ini")],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        factories.wait_for(lambda: _listens(port, proc), 10, "pgbouncer to listen")
        yield str(target.set(host="127.0.0.1", port=port))
    finally:
        proc.terminate()
        proc.wait(10)


def _listens(port: int, proc: subprocess.Popen[bytes]) -> bool:
    if proc.poll() is not None:
        assert proc.stdout is not None
        raise AssertionError(f"pgbouncer exited: {proc.stdout.read().decode()}")
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.slow
def test_the_same_through_pgbouncer_in_transaction_mode(
        tmp_path: pathlib.Path, pg_url: str) -> None:
    with pgbouncer(pg_url) as pooled, pair(
            tmp_path, pg_url, pooled, CORRAL_DATABASE_POOLER="1", CORRAL_LEADER_LEASE="4",
            CORRAL_LEADER_RENEW="1") as p:
        chaos(p, kills=2, per_round=4, seed=int(os.environ.get("CORRAL_CHAOS_SEED",
                                                                random.randrange(10**6))))


def test_a_server_told_of_a_pooler_prepares_no_statement_on_the_database(
        tmp_path: pathlib.Path, pg_url: str) -> None:
    for pooler in (False, True):
        platform = server.build(make_settings(tmp_path / f"home-{pooler}", database_url=pg_url,
                                              database_pooler=pooler))
        try:
            with platform.store.read() as conn:
                threshold = conn.connection.driver_connection.prepare_threshold
            assert (threshold is None) == pooler, (pooler, threshold)
        finally:
            platform.stop()


def test_a_term_whose_scheduler_stopped_at_a_refused_write_begins_again_in_the_same_epoch(
        tmp_path: pathlib.Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pass's write refused by the guard (the server's own term ran out while a renewal
    waited for a row) stops the term's threads; the next renewal, in the same epoch, begins
    the term again (before, the server went on renewing with no scheduler). The old term's
    scheduler, were it still running, writes nothing in the new one."""
    platform = server.build(make_settings(tmp_path / "home", database_url=pg_url,
                                          server_name="here"))
    platform.start()
    try:
        first, first_fence = platform.reconciler, platform.rec_fence

        def refused() -> bool:
            raise leadership.LostLease("epoch 1 is over: this server no longer leads")

        monkeypatch.setattr(first, "tick", refused)
        platform.wake_event.set()
        [thread] = [t for t in platform.term_threads if t.name == "corral-reconciler"]
        thread.join(30)
        assert not thread.is_alive()
        platform._lead_once()  # renewed in epoch 1
        assert platform.fence.epoch == 1
        assert platform.term_threads and all(t.is_alive() for t in platform.term_threads)
        assert platform.reconciler is not first
        # (a thread that outlived its term's end, in a lease renewed in the same epoch)
        with pytest.raises(leadership.LostLease), platform.store.begin() as conn:
            first_fence(conn)
        with platform.store.begin() as conn:
            platform.rec_fence(conn)  # the new term's own writes pass
    finally:
        platform.stop()


def test_a_server_that_lost_its_lease_stops_scheduling_and_leads_again_afresh(
        tmp_path: pathlib.Path, pg_url: str) -> None:
    platform = server.build(make_settings(tmp_path / "home", database_url=pg_url,
                                          server_name="here"))
    platform.start()
    try:
        first, first_fence = platform.reconciler, platform.rec_fence
        assert platform.fence.epoch == 1 and platform.term_threads
        other = leasing.Leader(platform.store, "there", None, leasing.Times())
        with platform.store.begin() as conn:  # as if this server had been paused
            conn.execute(sa.text("UPDATE leadership SET expires_at = 0"))
        assert other.step()
        platform._lead_once()  # it learns, and its scheduling stops
        assert platform.fence.epoch is None and not platform.term_threads
        with pytest.raises(leadership.LostLease), platform.fenced.begin():
            pass
        other.release()
        platform._lead_once()  # a new term, begun as a restart would: a new reconciler
        assert platform.fence.epoch == 3 and platform.term_threads
        assert platform.reconciler is not first
        # (a thread that outlived its term's end, in a lease renewed in the same epoch)
        with pytest.raises(leadership.LostLease), platform.store.begin() as conn:
            first_fence(conn)
        with platform.store.begin() as conn:
            platform.rec_fence(conn)  # the new term's own writes pass
    finally:
        platform.stop()
