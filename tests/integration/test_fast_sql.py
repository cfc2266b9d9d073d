"""Statements run straight on the driver (store/fast.py) give what SQLAlchemy gives, on
SQLite and on PostgreSQL: the same rows and types, defaults, errors and transactions."""

from __future__ import annotations

import pathlib

import pytest
import sqlalchemy as sa

from corral.domain import resources, specs
from corral.scheduler import catalog as catalog_mod
from corral.scheduler import submit
from corral.store import db, fast, repo, schema
from tests import conftest, factories

NOW = 1_700_000_000_000
J, T = schema.jobs, schema.tasks


@pytest.fixture
def job_id(store: db.Store, tmp_path: pathlib.Path) -> str:
    node = resources.Node(name="local", cpu=2, memory_mb=8192)
    cat = catalog_mod.Catalog.build(conftest.make_settings(tmp_path / "home"), [node])
    body = specs.JobCreate.model_validate(factories.make_job(command="true"))
    with store.begin() as conn:
        project = repo.ensure_default_project(conn, NOW)
        return submit.create_job(conn, cat, body, project_id=project, now=NOW)


def test_rows_are_those_sqlalchemy_reads_with_the_same_types(store: db.Store,
                                                             job_id: str) -> None:
    q = sa.select(J, sa.literal(2.5).label("half")).where(J.c.id == sa.bindparam("k"))
    with store.begin() as conn:
        conn.execute(J.update().where(J.c.id == job_id)
                     .values(preemptible=True, spread=False, cpu=1.5))
    with store.read() as conn:
        want = conn.execute(q, {"k": job_id}).one()
        got = fast.Prepared(q).first(conn, {"k": job_id})
    assert tuple(got) == tuple(want)
    assert [type(v) for v in got] == [type(v) for v in want]
    assert got.preemptible is True and got.spread is False  # booleans, not 1 and 0
    assert got.cpu == 1.5 and got.start_time is None and got.id == job_id
    assert got._mapping == dict(want._mapping)


def test_reads_many_rows_a_scalar_or_nothing(store: db.Store, job_id: str) -> None:
    count = fast.Prepared(sa.select(sa.func.count()).select_from(J))
    by_phase = fast.Prepared(sa.select(J.c.id).where(J.c.phase == sa.bindparam("k_phase")))
    with store.read() as conn:
        assert count.scalar(conn) == 1
        assert [r.id for r in by_phase.rows(conn, {"k_phase": "Creating"})] == [job_id]
        assert by_phase.rows(conn, {"k_phase": "Running"}) == []
        assert by_phase.first(conn, {"k_phase": "Running"}) is None
        assert by_phase.scalar(conn, {"k_phase": "Running"}) is None


def test_an_insert_fills_in_constant_defaults_and_an_update_sets_what_it_is_given(
        store: db.Store, job_id: str) -> None:
    insert = fast.Prepared(T.insert().inline())
    update = fast.Prepared(T.update().where(T.c.job_id == sa.bindparam("k_job")))
    rows = [{"job_id": job_id, "attempt": 1, "name": f"worker-{i}", "rank": i, "node": "n",
             "state": "launching", "launch_id": f"l{i}"} for i in range(2)]
    with store.begin() as conn:
        insert.run_many(conn, rows)  # gpu_ids left out: its default, ""
        assert update.run(conn, {"state": "running", "k_job": job_id}) == 2
        assert update.run(conn, {"state": "running", "k_job": "no such job"}) == 0
    with store.read() as conn:
        got = conn.execute(sa.select(T.c.name, T.c.gpu_ids, T.c.state).order_by(T.c.rank))
        assert [tuple(r) for r in got] == [("worker-0", "", "running"),
                                           ("worker-1", "", "running")]


def test_a_failed_statement_raises_sqlalchemys_error_and_the_transaction_rolls_back(
        store: db.Store, job_id: str) -> None:
    insert = fast.Prepared(T.insert().inline())
    row = {"job_id": job_id, "attempt": 1, "name": "worker-0", "rank": 0, "node": "n",
           "state": "launching", "launch_id": "a"}
    with pytest.raises(sa.exc.IntegrityError), store.begin() as conn:
        insert.run(conn, row)
        insert.run(conn, row)  # the same primary key again
    with store.read() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(T)).scalar_one() == 0


def test_what_it_cannot_run_as_sqlalchemy_would_is_refused_at_once(store: db.Store) -> None:
    expanding = sa.select(J.c.id).where(J.c.id.in_(sa.bindparam("ids", expanding=True)))
    with store.read() as conn, pytest.raises(TypeError, match="expanding"):
        fast.Prepared(expanding).rows(conn, {"ids": ["x"]})
