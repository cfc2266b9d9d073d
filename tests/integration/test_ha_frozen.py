"""High availability with a leader frozen (SIGSTOP: as a paused VM or a cut network looks to
the database) while it is inside a transaction that holds the lease row, directly on
PostgreSQL and through PgBouncer in transaction mode (docs/high-availability.md, "A frozen
leader").

Each freeze is made to land inside such a transaction, every time (a random one lands
there about one time in five): the test watches the database until the leader's own session
holds a lock on the lease's table, stops the leader, waits until all its threads have
stopped, and checks that the same transaction is still open, waiting for the leader
(otherwise it lets the leader go on and tries again). The database must end that
transaction, another server must lead within the lease (and its next try), and the leader,
woken, must write nothing as leader: it says it follows, the lease stays the other's, and
no job starts twice.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import pathlib
import signal
import time
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from tests import factories
from tests.integration import test_crash as crash
from tests.integration import test_ha as ha

pytestmark = pytest.mark.slow

#: the servers' lease times here (seconds): short, so that each failover is quick
LEASE, RENEW = 4.0, 1.0
#: how much later than the lease's end and a standby's next try a failover may come, on a
#: slow machine (without the database ending the frozen transaction it never comes at all)
SLACK_S = 5.0

#: the session of a server (its application_name) inside a transaction that holds or
#: waits for the lease row: SELECT ... FOR SHARE / FOR UPDATE and UPDATE lock its table
#: in these modes until the transaction ends
HOLDING = sa.text("""
    SELECT a.pid, a.xact_start FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid
    WHERE a.application_name = :app AND l.relation = 'leadership'::regclass
      AND l.mode IN ('RowShareLock', 'RowExclusiveLock') AND a.xact_start IS NOT NULL
    ORDER BY a.pid LIMIT 1""")


def holding(conn: sa.Connection, app: str) -> tuple[int, datetime.datetime] | None:
    row = conn.execute(HOLDING, {"app": app}).first()
    return None if row is None else (int(row.pid), row.xact_start)


def stopped(pid: int) -> bool:
    """Every thread of process `pid` has stopped (a signal is delivered after kill()
    returns: a thread may still send a statement meanwhile)."""
    tasks = pathlib.Path(f"/proc/{pid}/task")
    return all((t / "stat").read_text().rsplit(")", 1)[1].split()[0] == "T"
               for t in tasks.iterdir())


def waiting_for_its_server(conn: sa.Connection, backend: int,
                           xact_start: datetime.datetime) -> bool:
    """The backend's transaction, begun at `xact_start`, is still open and waits for its
    server's next statement (once the one under way, if any, has ended by itself).

    A transaction that stays busy ("active") with its server stopped is one the database
    will not end: it fails the test, saying what it was doing (a statement sent as a
    pipeline of rows, before db._no_pipelines, waited there for ever)."""
    state = sa.text("SELECT state, xact_start, wait_event, query FROM pg_stat_activity "
                    "WHERE pid = :pid")
    deadline = time.monotonic() + 2 * LEASE + SLACK_S
    while (row := conn.execute(state, {"pid": backend}).first()) is not None \
            and row.state == "active" and row.xact_start == xact_start:
        assert time.monotonic() < deadline, (
            f"the stopped leader's transaction stays busy ({row.wait_event}) in "
            f"{row.query!r}: the database never ends it")
        time.sleep(0.01)
    return row is not None and (row.state, row.xact_start) == ("idle in transaction",
                                                               xact_start)


def freeze_inside(conn: sa.Connection, srv: crash.ServerProcess) -> int:
    """SIGSTOP `srv` while its session holds the lease row in a transaction that waits for
    it: the pid of that session's backend."""
    assert srv.proc is not None
    pid, app = srv.proc.pid, srv.env["PGAPPNAME"]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        seen = holding(conn, app)
        if seen is None:
            continue
        os.kill(pid, signal.SIGSTOP)
        factories.wait_for(lambda: stopped(pid), 10, "the server to stop")
        if waiting_for_its_server(conn, *seen):
            return seen[0]
        os.kill(pid, signal.SIGCONT)  # its transaction ended meanwhile: again
    raise AssertionError(f"{app} never held the lease row in a transaction")


@contextlib.contextmanager
def frozen_pair(tmp_path: pathlib.Path, pg_url: str, serve_url: str,
                **env: str) -> Iterator[ha.Pair]:
    # (CORRAL_NOTEBOOK_PORT=0: two servers' API ports may be next to each other)
    with ha.pair(tmp_path, pg_url, serve_url, CORRAL_LEADER_LEASE=str(LEASE),
                 CORRAL_LEADER_RENEW=str(RENEW), CORRAL_NOTEBOOK_PORT="0", **env) as p:
        try:
            yield p
        finally:
            for srv in p.servers:  # (killed next; a stopped process is killed all the same)
                if srv.proc is not None:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(srv.proc.pid, signal.SIGCONT)


def freeze_the_leader_again_and_again(p: ha.Pair, rounds: int) -> list[float]:
    """Freeze the leader inside its transaction, wait for the other to lead, wake the
    frozen one: it follows. Jobs submitted all along complete, each started once. The
    failover times, from the freeze."""
    jobs: dict[str, str] = {}
    failovers = []
    watcher = sa.create_engine(p.db_url, isolation_level="AUTOCOMMIT")
    try:
        with watcher.connect() as conn:
            for n in range(rounds):
                epoch, leader = factories.wait_for(p.leader, 30, "a leader")
                for i, srv in enumerate(p.servers):
                    jobs[f"r{n}j{i}"] = p.submit(srv, f"r{n}j{i}", 1.0)
                backend = freeze_inside(conn, leader)
                frozen_at = time.monotonic()
                new_epoch, successor = factories.wait_for(
                    lambda: (now := p.leader()) is not None and now[0] > epoch and now,  # noqa: B023
                    30, "another server to lead while the leader is frozen")
                failovers.append(time.monotonic() - frozen_at)
                assert successor is not leader
                # The database ended the frozen transaction (its session is gone): nothing
                # the leader wrote in it lands, whatever it does once woken.
                assert conn.execute(sa.text("SELECT 1 FROM pg_stat_activity WHERE pid = :pid"),
                                    {"pid": backend}).first() is None
                assert leader.proc is not None
                os.kill(leader.proc.pid, signal.SIGCONT)
                # Woken, it learns that it no longer leads (its own writes fail), stops
                # scheduling, and says who leads.
                lost = f"lost the leadership lease (epoch {epoch})"
                factories.wait_for(lambda: lost in leader.log.read_text(), 30,  # noqa: B023
                                   "the woken leader to step down")
                assert _follows(leader, successor)
                assert p.leader() == (new_epoch, successor)
        print("failovers from the freeze (s):", ", ".join(f"{t:.1f}" for t in failovers))
        ended = {tag: p.servers[0].wait(job_id, 60) for tag, job_id in jobs.items()}
        assert {tag: j["status"]["phase"] for tag, j in ended.items()} == dict.fromkeys(
            jobs, "Completed")
        starts = crash.started(p.shared)
        assert {tag: len(starts[tag]) for tag in jobs} == dict.fromkeys(jobs, 1), \
            "a task ran twice"
        assert max(failovers) < LEASE + RENEW + SLACK_S, failovers
        return failovers
    finally:
        watcher.dispose()


def _follows(srv: crash.ServerProcess, leader: crash.ServerProcess) -> bool:
    said = srv.http.get("/corral/info").json()["leader"]
    return bool((said["url"], said["this_server"]) == (leader.url, False))


def test_a_leader_frozen_inside_a_transaction_loses_the_lead_and_writes_nothing_after(
        tmp_path: pathlib.Path, pg_url: str) -> None:
    with frozen_pair(tmp_path, pg_url, pg_url) as p:
        freeze_the_leader_again_and_again(p, rounds=3)


def test_the_same_through_pgbouncer_in_transaction_mode(
        tmp_path: pathlib.Path, pg_url: str) -> None:
    with ha.pgbouncer(pg_url) as pooled, frozen_pair(
            tmp_path, pg_url, pooled, CORRAL_DATABASE_POOLER="1") as p:
        freeze_the_leader_again_and_again(p, rounds=2)
