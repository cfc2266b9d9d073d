"""The scheduler's SQL on SQLite and PostgreSQL: the queue window per stream, queue
positions by pool and priority, quotas, usage, and the 0003 migration over old rows."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from corral.scheduler import catalog as catalog_mod
from corral.store import db, repo, schema
from tests.integration.test_store import NOW, catalog, create, project  # noqa: F401


def prio(p: int) -> dict[str, Any]:
    return {"spec": {"resource": {"flavor_id": "corral.cpu.1u", "node_count": 1},
                     "schedule_policy": {"priority": p}}}


def test_the_queue_window_takes_the_first_jobs_of_each_stream(
        store: db.Store, catalog: catalog_mod.Catalog, project: str) -> None:  # noqa: F811
    low = [create(store, catalog, project, **prio(1)) for _ in range(4)]
    high = [create(store, catalog, project, **prio(3)) for _ in range(2)]
    with store.read() as conn:
        window = repo.queued(conn, limit=2)
        ahead = repo.queue_positions(conn, [*low, *high])
    assert [r.id for r in window] == [low[0], low[1], high[0], high[1]]
    assert {r.priority for r in window} == {1, 3}
    assert all(r.pool_id == "default" for r in window)
    # Positions count Pending jobs only; none is admitted yet.
    assert ahead == {}
    with store.begin() as conn:
        conn.execute(schema.jobs.update().values(phase="Pending"))
        ahead = repo.queue_positions(conn, [*low, *high])
    assert [ahead[j] for j in high] == [0, 1]
    assert [ahead[j] for j in low] == [2, 3, 4, 5]


def test_the_window_of_a_single_stream_is_its_first_jobs_without_those_staging(
        store: db.Store, catalog: catalog_mod.Catalog, project: str) -> None:  # noqa: F811
    jobs = [create(store, catalog, project) for _ in range(5)]
    with store.begin() as conn:
        conn.execute(schema.jobs.update().where(schema.jobs.c.id == jobs[1])
                     .values(staging="pending"))
        window = repo.queued(conn, limit=3)
    assert [r.id for r in window] == [jobs[0], jobs[2], jobs[3]]


def test_quotas_and_usage_round_trip(store: db.Store, project: str) -> None:  # noqa: F811
    rows = [{"pool_id": "default", "cpu": 2.5, "memory_mb": 4096, "gpu": None,
             "borrowing": True, "weight": 2.0}]
    with store.begin() as conn:
        repo.set_quotas(conn, project, rows, NOW)
        repo.save_usage(conn, [{"project_id": project, "pool_id": "default", "share": 0.25,
                                "updated_at": NOW}])
    with store.read() as conn:
        [q] = repo.quotas(conn, project)
        [u] = repo.usage(conn)
    assert (q.cpu, q.memory_mb, q.gpu, q.borrowing, q.weight) == (2.5, 4096, None, True, 2.0)
    assert (u.share, u.updated_at) == (0.25, NOW)
    with store.begin() as conn:
        repo.set_quotas(conn, project, [], NOW)
        assert repo.quotas(conn) == []


def test_migration_0003_fills_scheduling_fields_of_existing_jobs(db_url: str) -> None:
    engine = db.make_engine(db_url)
    try:
        db.upgrade(engine, "0001")
        with engine.begin() as conn:
            conn.execute(sa.text("INSERT INTO projects (id, name, created_at) "
                                 "VALUES ('p', 'p', 0)"))
            conn.execute(sa.text(
                "INSERT INTO jobs (id, seq, project_id, name, description, kind, user_name, "
                "phase, secondary_phase, spec, flavor_id, node_count, cpu, memory_mb, gpu, "
                "retry_limit, create_time, updated_at) VALUES ('j', 1, 'p', 'old', '', 'job', "
                "'', 'Pending', 'Queuing', '{}', 'f', 1, 1, 1024, 0, 0, 0, 0)"))
        db.upgrade(engine)
        with engine.connect() as conn:
            row = conn.execute(sa.select(schema.jobs)).one()
        assert (row.pool_id, row.priority, row.preemptible, row.borrowed, row.wait_code) == (
            "default", 1, False, False, None)
        db.downgrade(engine, "0001")  # and back down, and up again
        db.upgrade(engine)
    finally:
        engine.dispose()
