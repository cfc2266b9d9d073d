"""What the job kinds share: owned jobs made once, stopped and deleted with their owner;
guarded state changes of a kind's own objects; the loop that runs the controllers."""

from __future__ import annotations

import enum
import functools
import math
import pathlib
import re
import time
from typing import Any

import pytest
import sqlalchemy as sa

from corral.domain import specs
from corral.kinds import loop, owned
from corral.services import catalog as catalog_mod
from corral.services import runtime, submit
from corral.store import db, job_repo, kind_repo, schema
from tests import conftest, factories
from tests.integration.test_store import NOW, catalog, project  # noqa: F401

KIND = "test_kind"


def services_for(store: db.Store, cat: catalog_mod.Catalog, project_id: str,
                 home: pathlib.Path) -> runtime.Runtime:
    return runtime.Runtime(store=store, catalog=cat, default_project_id=project_id,
                           settings=conftest.make_settings(home))


def an_owner(project_id: str, name: str = "loop-a") -> owned.Owner:
    return owned.Owner(kind=KIND, id=f"id-{name}", project_id=project_id, user_name="ann",
                       name=name)


def body() -> specs.JobCreate:
    return specs.JobCreate.model_validate(factories.make_job(command="true"))


def test_a_role_is_submitted_once_however_often_it_is_asked(
        store: db.Store, catalog: catalog_mod.Catalog, project: str,  # noqa: F811
        tmp_path: pathlib.Path) -> None:
    how, owner = services_for(store, catalog, project, tmp_path), an_owner(project)
    with store.begin() as conn:
        first = owned.submit(conn, how, owner, "round-1/train", body(), NOW)
    with store.begin() as conn:  # a controller that lost track of it asks again
        again = owned.submit(conn, how, owner, "round-1/train", body(), NOW)
        other = owned.submit(conn, how, owner, "round-1/eval", body(), NOW)
    assert again.id == first.id and other.id != first.id
    assert (first.name, first.user_name) == ("loop-a-round-1-train", "ann")
    assert (first.owner_kind, first.owner_id, first.owner_role) == (KIND, owner.id,
                                                                    "round-1/train")
    with store.read() as conn:
        assert set(job_repo.owned_jobs(conn, KIND, owner.id)) == {"round-1/train",
                                                                  "round-1/eval"}
    # The database holds it too: a second job in the same role is refused.
    with pytest.raises(sa.exc.IntegrityError), store.begin() as conn:
        conn.execute(schema.jobs.update().where(schema.jobs.c.id == other.id)
                     .values(owner_role="round-1/train"))


def test_owned_jobs_are_stopped_and_deleted_with_their_owner(
        store: db.Store, catalog: catalog_mod.Catalog, project: str,  # noqa: F811
        tmp_path: pathlib.Path) -> None:
    how = services_for(store, catalog, project, tmp_path)
    owner, bystander = an_owner(project), an_owner(project, "b")
    with store.begin() as conn:
        mine = [owned.submit(conn, how, owner, f"r{i}", body(), NOW) for i in range(2)]
        theirs = owned.submit(conn, how, bystander, "r0", body(), NOW)
        assert owned.stop(conn, owner, NOW, "Job stopped with its loop") == 2
        assert owned.stop(conn, owner, NOW, "again") == 0  # Terminating already
        owned.delete(conn, owner, NOW)
    with store.read() as conn:
        after = {j.id: job_repo.job_by_id(conn, j.id) for j in [*mine, theirs]}
    assert all(after[j.id].phase == "Terminating" and after[j.id].deleted_at for j in mine)
    assert after[theirs.id].phase == "Creating" and after[theirs.id].deleted_at is None


def test_job_names_fit_the_name_rules() -> None:
    owner = owned.Owner(kind=KIND, id="x", project_id="p", user_name="", name="n" * 64)
    name = owned.job_name(owner, "round-12/train + eval")
    assert len(name) == 64 and name.endswith("-round-12-train-eval")
    assert specs.NAME_RE.match(name)


TABLE = sa.Table("test_objects", sa.MetaData(), sa.Column("id", sa.String, primary_key=True),
                 sa.Column("state", sa.String), sa.Column("note", sa.String))


class _State(enum.StrEnum):
    WAITING = "waiting"
    TRAINING = "training"
    FAILED = "failed"
    DONE = "done"


#: waiting -> training -> done, and failed from either
_TABLE = {_State.WAITING: frozenset({_State.TRAINING, _State.FAILED}),
          _State.TRAINING: frozenset({_State.DONE, _State.FAILED}),
          _State.FAILED: frozenset(), _State.DONE: frozenset()}


def test_an_objects_state_moves_only_as_its_table_allows(store: db.Store) -> None:
    with store.begin() as conn:
        TABLE.create(conn)
        conn.execute(TABLE.insert(), {"id": "o1", "state": "waiting"})
    move = functools.partial(kind_repo.transition, table=TABLE, key={"id": "o1"},
                             transitions=_TABLE, kind=KIND, object_id="o1", now=NOW)
    with store.begin() as conn:
        assert not move(conn, to=_State.DONE, message="not from waiting")
        assert move(conn, to=_State.TRAINING, message="Round 1 began", values={"note": "n"})
        assert not move(conn, to=_State.TRAINING, message="again")
    with store.read() as conn:
        assert conn.execute(sa.select(TABLE.c.state, TABLE.c.note)).one() == ("training", "n")
        total, events = kind_repo.list_events(conn, KIND, "o1")
    assert total == 1 and [e.message for e in events] == ["Round 1 began"]


def test_a_compare_and_set_moves_only_from_the_state_read(store: db.Store) -> None:
    with store.begin() as conn:
        TABLE.create(conn)
        conn.execute(TABLE.insert(), {"id": "o1", "state": "training"})
    move = functools.partial(kind_repo.move, table=TABLE, key={"id": "o1"}, transitions=_TABLE)
    with store.begin() as conn:
        # read as waiting, decided on that: the table allows failed from training too,
        # but the row is no longer what the decision was made on
        assert not move(conn, to=_State.FAILED, was=_State.WAITING)
        assert move(conn, to=_State.FAILED, was=_State.TRAINING)
    with store.read() as conn:
        assert conn.execute(sa.select(TABLE.c.state)).scalar_one() == "failed"


class _Controller:
    def __init__(self, kind: str, fail: bool = False) -> None:
        self.kind, self.fail, self.passes = kind, fail, 0

    def reconcile(self, now: int) -> bool:
        self.passes += 1
        if self.fail:
            raise RuntimeError("a bug in one kind")
        return False


def test_one_controllers_failure_does_not_stop_the_others(caplog: Any) -> None:
    broken, fine = _Controller("broken", fail=True), _Controller("fine")
    runner = loop.Loop([broken, fine])
    assert runner.tick() is False
    assert (broken.passes, fine.passes) == (1, 1)
    assert "broken controller pass failed" in caplog.text


def test_jobs_owned_by_an_object_are_told_apart(
        store: db.Store, catalog: catalog_mod.Catalog, project: str,  # noqa: F811
        tmp_path: pathlib.Path) -> None:
    with store.begin() as conn:
        mine = owned.submit(conn, services_for(store, catalog, project, tmp_path),
                            an_owner(project), "r0", body(), NOW)
        plain = submit.create_job(conn, catalog, body(), project_id=project, now=NOW,
                                  user_name="ann")
    with store.read() as conn:
        assert job_repo.owners(conn, [plain, mine.id, "no-such-job"]) == ({mine.id}, {plain})
        assert job_repo.owners(conn, []) == (set(), set())
    # A job's owner is set when it is made and never changes: a job once seen to have none
    # is not looked up again, and its changes do not even wake the controllers' thread.
    lookups: list[str] = []
    sa.event.listen(store.engine, "before_cursor_execute",
                    lambda _c, _k, statement, *_: lookups.append(statement)
                    if "owner_kind IS NOT NULL" in statement else None)
    kinds = loop.Loop([], store=store)
    kinds.jobs_changed([plain])
    assert not kinds._due(False, math.inf) and len(lookups) == 1
    kinds._wake.clear()  # (as the thread does before each look)
    kinds.jobs_changed([plain])
    assert not kinds._wake.is_set()
    assert not kinds._due(False, math.inf) and len(lookups) == 1
    kinds.jobs_changed([plain, mine.id])
    assert kinds._wake.is_set() and kinds._due(False, math.inf) and len(lookups) == 2


#: what the controllers' passes read first: every kind's live objects
KIND_TABLES = re.compile(r"\bFROM (notebooks|pipelines|il_loops)\b")


def test_jobs_that_no_object_owns_wake_no_controller_pass(tmp_path: Any) -> None:
    # No timed pass: only what wakes the controllers makes them read their objects.
    live = conftest.start_live(tmp_path / "home", tick_interval=3600)
    reads: list[str] = []

    def note(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        if KIND_TABLES.search(statement):
            reads.append(statement)

    try:
        sa.event.listen(live.embedded.platform.store.engine, "before_cursor_execute", note)
        for _ in range(3):  # each job queued, started and ended: changes of its own
            job = live.submit(factories.make_job(command="true"))
            assert live.wait(job["metadata"]["id"])["status"]["phase"] == "Completed"
        assert reads == []
        live.embedded.platform.kinds.wake()  # a pass asked for (a user acted) still runs
        deadline = time.monotonic() + 30
        while not reads and time.monotonic() < deadline:
            time.sleep(0.05)
        assert reads
    finally:
        conftest.stop_live(live)


def test_migration_0007_leaves_existing_jobs_unowned_and_goes_back_down(db_url: str) -> None:
    from tests.integration.test_store_scheduling import _migrated_from

    with _migrated_from(db_url, "0006", "Completed", "Completed") as engine:
        with engine.begin() as conn:
            job = job_repo.job_by_id(conn, "j")
            assert job is not None
            assert (job.owner_kind, job.owner_id, job.owner_role) == (None, None, None)
            kind_repo.add_event(conn, KIND, "o", NOW, "hello")
        db.downgrade(engine, "0006")
        with engine.connect() as conn:
            columns = list(conn.execute(sa.text("SELECT * FROM jobs")).keys())
            assert "owner_kind" not in columns
            assert conn.execute(sa.text("SELECT count(*) FROM jobs")).scalar_one() == 1
        db.upgrade(engine)


def test_an_object_s_database_error_is_said_once_without_its_statement(
        store: db.Store) -> None:
    # The statement and parameters of a database error differ at every pass (ids, times)
    # and are no user's to read: the event says the error's kind and first line, once.
    def work(n: int) -> bool:
        raise sa.exc.IntegrityError("INSERT INTO secret_table VALUES (?)", (n,),
                                    Exception("UNIQUE constraint failed: t.x"))

    for n in range(3):
        assert loop.isolated(store, KIND, "o1", NOW + n, lambda n=n: work(n)) is False

    with store.read() as conn:
        total, events = kind_repo.list_events(conn, KIND, "o1")
    assert total == 1
    assert "UNIQUE constraint failed: t.x" in events[0].message
    assert "secret_table" not in events[0].message and "SQL" not in events[0].message


def test_a_connection_lost_mid_pass_stops_the_whole_pass(store: db.Store) -> None:
    def work() -> bool:
        raise sa.exc.DBAPIError("SELECT 1", (), Exception("server closed the connection"),
                                connection_invalidated=True)

    with pytest.raises(sa.exc.DBAPIError):
        loop.isolated(store, KIND, "o2", NOW, work)
    with store.read() as conn:
        assert kind_repo.list_events(conn, KIND, "o2")[0] == 0
