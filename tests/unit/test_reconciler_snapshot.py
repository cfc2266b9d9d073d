"""The reconciler decides from a snapshot, without the write lock, and applies its decisions
under guards: an API write is never kept waiting by a long queue, and one that lands between
a decision and its write wins.

The API here is a second store on the same database (its own connections and write lock, as
another process would have) that gives up at once when a writer holds SQLite. On both
SQLite and PostgreSQL.
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from corral.domain import scheduling
from corral.store import db, job_repo, schema
from tests.unit.test_reconciler import World
from tests.unit.test_reconciler_scheduling import make_world, policy


@pytest.fixture
def world(tmp_path: pathlib.Path, db_url: str) -> Iterator[World]:
    w = make_world(tmp_path, url=db_url)
    yield w
    w.store.dispose()


@pytest.fixture
def api(world: World) -> Iterator[db.Store]:
    store = db.Store(world.store.url)
    if store.is_sqlite:
        @sa.event.listens_for(store.engine, "connect")
        def _no_waiting(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA busy_timeout=0")
            cur.close()

    yield store
    store.dispose()


def after_decide(monkeypatch: pytest.MonkeyPatch, action: Callable[[], None]) -> list[Any]:
    """Run `action` once, right after the next pass has decided (before it writes)."""
    real = scheduling.decide
    decisions: list[Any] = []

    def hooked(*args: Any, **kwargs: Any) -> Any:
        d = real(*args, **kwargs)
        if not decisions:
            action()
        decisions.append(d)
        return d

    monkeypatch.setattr(scheduling, "decide", hooked)
    return decisions


def terminate(api: db.Store, w: World, job_id: str) -> None:
    with api.begin() as conn:  # as the API does it
        assert job_repo.request_terminate(conn, job_id, w.now_ms(), "Termination requested")


def test_an_api_write_goes_through_while_the_pass_decides(
        world: World, api: db.Store, monkeypatch: pytest.MonkeyPatch) -> None:
    job = world.submit()

    def write() -> None:
        with api.begin() as conn:
            job_repo.add_event(conn, job, world.now_ms(), "written while the scheduler decided")

    decisions = after_decide(monkeypatch, write)
    world.tick()
    assert decisions and [a.job_id for a in decisions[0].starts] == [job]
    assert world.phase(job)[0] == "Running"
    assert "written while the scheduler decided" in world.events(job)


def test_a_job_terminated_between_decision_and_write_is_not_started(
        world: World, api: db.Store, monkeypatch: pytest.MonkeyPatch) -> None:
    waiting = world.submit()
    decisions = after_decide(monkeypatch, lambda: terminate(api, world, waiting))
    world.tick()
    assert [a.job_id for a in decisions[0].starts] == [waiting]
    assert world.phase(waiting)[0] == "Terminating"
    assert world.fake.launches(waiting) == []
    world.tick(2)
    assert world.phase(waiting)[0] == "Terminated"
    assert world.fake.launches(waiting) == []
    assert not any(e.startswith("Job started") for e in world.events(waiting))


def test_a_reason_is_not_written_for_a_job_stopped_meanwhile(
        world: World, api: db.Store, monkeypatch: pytest.MonkeyPatch) -> None:
    world.submit(spec=policy(1, flavor_id="corral.cpu.full"))
    world.tick()
    waiting = world.submit(spec=policy(1, flavor_id="corral.cpu.full"))
    world.tick()
    assert world.job(waiting).wait_code is not None
    with world.store.begin() as conn:  # its reason is to be written again
        conn.execute(schema.jobs.update().where(schema.jobs.c.id == waiting)
                     .values(wait_code=None, wait_reason=None))
    before = world.events(waiting)
    after_decide(monkeypatch, lambda: terminate(api, world, waiting))
    world.tick()
    row = world.job(waiting)
    assert row.phase == "Terminating"
    assert row.wait_code is None and row.wait_reason is None
    assert world.events(waiting) == [*before, "Termination requested"]


def test_a_victim_that_stopped_meanwhile_is_not_preempted(
        world: World, api: db.Store, monkeypatch: pytest.MonkeyPatch) -> None:
    victim = world.submit(spec=policy(1, True, flavor_id="corral.cpu.full"))
    world.tick()
    urgent = world.submit(spec=policy(3))
    decisions = after_decide(monkeypatch, lambda: terminate(api, world, victim))
    world.tick()
    assert [v.job_id for v in decisions[0].preempts] == [victim]
    assert world.job(victim).preempt_requested_at is None
    assert not any(e.startswith("Preempted") for e in world.events(victim))
    world.tick(2)  # it stops as terminated, not requeued; the urgent job takes its place
    assert world.phase(victim)[0] == "Terminated"
    assert world.phase(urgent)[0] == "Running"
