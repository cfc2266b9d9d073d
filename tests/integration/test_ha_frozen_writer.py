"""High availability with a follower frozen (SIGSTOP) inside one of its API's write
transactions, holding a job's row (docs/high-availability.md, "A frozen or cut-off
leader"): the leader's scheduling pass, which writes that row holding the lease row, must
not wait for it for as long as the follower stays frozen. The database ends the follower's
transaction once it has waited leader_lease less the margin for its server; scheduling
goes on, and the follower, woken, finds its transaction gone: its client gets an error and
nothing of it was written.

The freeze is made to land inside such a transaction every time, as test_ha_frozen.py
does for the leader: the follower's API is sent description changes of the job one after
another, the test watches the database until the follower's session is inside a
transaction that has the job's row locked, stops the follower, and checks the same
transaction still waits for it (else it lets the follower go on and tries again).
"""

from __future__ import annotations

import datetime
import os
import pathlib
import signal
import threading
import time

import httpx
import pytest
import sqlalchemy as sa

from tests import factories
from tests.integration import test_crash as crash
from tests.integration import test_ha as ha
from tests.integration import test_ha_frozen as frozen

pytestmark = pytest.mark.slow

#: a session of a server (its application_name) inside a transaction that has written to
#: the jobs table
WRITING = sa.text("""
    SELECT a.pid, a.xact_start FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid
    WHERE a.application_name = :app AND l.relation = 'jobs'::regclass
      AND l.mode = 'RowExclusiveLock' AND a.xact_start IS NOT NULL
    ORDER BY a.pid LIMIT 1""")


def row_locked(conn: sa.Connection, job_id: str) -> bool:
    """Someone's transaction holds the job's row (a lock this session cannot take)."""
    try:
        with conn.begin():
            conn.execute(sa.text("SET LOCAL lock_timeout = '50ms'"))
            conn.execute(sa.text("SELECT 1 FROM jobs WHERE id = :id FOR UPDATE"),
                         {"id": job_id})
    except sa.exc.OperationalError:
        return True
    return False


class Describer(threading.Thread):
    """A client changing the job's description through `srv`, one request after another,
    until told to stop: what each request answered."""

    def __init__(self, srv: crash.ServerProcess, job_id: str) -> None:
        super().__init__(daemon=True)
        self.srv, self.job_id = srv, job_id
        self.done = threading.Event()
        self.answers: list[tuple[str, int | str]] = []

    def run(self) -> None:
        with httpx.Client(base_url=self.srv.url, headers=self.srv.http.headers,
                          timeout=120) as http:
            n = 0
            while not self.done.is_set():
                text = f"d{n}"
                try:
                    r = http.put(self.srv.path(f"/training-jobs/{self.job_id}"),
                                 json={"description": text})
                    self.answers.append((text, r.status_code))
                except httpx.HTTPError as exc:
                    self.answers.append((text, type(exc).__name__))
                n += 1


def freeze_writing(watch: sa.Connection, probe: sa.Connection, srv: crash.ServerProcess,
                   job_id: str) -> int:
    """SIGSTOP `srv` inside a write transaction of its own that holds the job's row and
    waits for it: that session's backend pid."""
    assert srv.proc is not None
    pid, app = srv.proc.pid, srv.env["PGAPPNAME"]
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        row = watch.execute(WRITING, {"app": app}).first()
        if row is None:
            continue
        seen: tuple[int, datetime.datetime] = (int(row.pid), row.xact_start)
        os.kill(pid, signal.SIGSTOP)
        factories.wait_for(lambda: frozen.stopped(pid), 10, "the server to stop")
        if frozen.waiting_for_its_server(watch, *seen) and row_locked(probe, job_id):
            return seen[0]
        os.kill(pid, signal.SIGCONT)  # not there, or its transaction ended meanwhile
    raise AssertionError(f"{app} never held the job's row in a transaction")


def test_a_follower_frozen_holding_a_jobs_row_stalls_scheduling_no_longer_than_the_limit(
        tmp_path: pathlib.Path, pg_url: str) -> None:
    with frozen.frozen_pair(tmp_path, pg_url, pg_url) as p:
        freeze_the_follower_while_the_leader_schedules(p)


def test_the_same_through_pgbouncer_in_transaction_mode(
        tmp_path: pathlib.Path, pg_url: str) -> None:
    with ha.pgbouncer(pg_url) as pooled, frozen.frozen_pair(
            tmp_path, pg_url, pooled, CORRAL_DATABASE_POOLER="1") as p:
        freeze_the_follower_while_the_leader_schedules(p)


def freeze_the_follower_while_the_leader_schedules(p: ha.Pair) -> None:
    _, leader = factories.wait_for(p.leader, 30, "a leader")
    [follower] = [s for s in p.servers if s is not leader]
    held = p.submit(leader, "held", 600)
    [task] = factories.wait_for(lambda: crash.started(p.shared).get("held"), 60,
                                "the job to start")
    watcher = sa.create_engine(p.db_url, isolation_level="AUTOCOMMIT")
    prober = sa.create_engine(p.db_url)
    client = Describer(follower, held)
    first = leader.job(held)["metadata"]["description"]
    try:
        with watcher.connect() as watch, prober.connect() as probe:
            client.start()
            backend = freeze_writing(watch, probe, follower, held)
            # The leader's pass must write the held job's row: its task ends.
            os.kill(task, signal.SIGKILL)
            after = p.submit(leader, "after", 0.2)
            # Scheduling goes on while the follower is still frozen: the database
            # ended its transaction (its session is gone) and the row is free.
            ended = leader.wait(after, 60)["status"]
            assert ended["phase"] == "Completed", ended
            assert watch.execute(sa.text("SELECT 1 FROM pg_stat_activity WHERE pid = :p"),
                                 {"p": backend}).first() is None
            assert follower.proc is not None
            # (counted while it is frozen: woken, it may answer before this test's next
            # line runs, and the client send its next request)
            frozen_at = len(client.answers)
            os.kill(follower.proc.pid, signal.SIGCONT)
            # Woken, the follower finds its transaction gone: the request it was
            # answering fails, and its description was never written.
            factories.wait_for(lambda: len(client.answers) > frozen_at, 60,
                               "the frozen request to be answered")
            client.done.set()
            client.join(60)
            text, answer = client.answers[frozen_at]
            assert answer != 200, client.answers[frozen_at - 2:frozen_at + 2]
            described = leader.job(held)["metadata"].get("description")
            written = [first] + [t for t, a in client.answers if a == 200]
            assert described != text and described == written[-1]
        assert len(crash.started(p.shared)["after"]) == 1
    finally:
        client.done.set()
        watcher.dispose()
        prober.dispose()

