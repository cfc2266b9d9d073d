"""The store's side of fault tolerance, on SQLite and PostgreSQL: the migration, and the
samples a hang is judged by."""

from __future__ import annotations

import sqlalchemy as sa

from corral.store import db, job_repo
from tests.integration.test_store_scheduling import _old_job


def test_migration_0011_renames_terminated_to_stopped_and_goes_back_down(db_url: str) -> None:
    engine = db.make_engine(db_url)
    try:
        db.upgrade(engine, "0010")
        with engine.begin() as conn:
            _old_job(conn, "Terminated", "Terminated")
            conn.execute(sa.text("UPDATE jobs SET failure_class = 'terminated'"))
            conn.execute(sa.text("INSERT INTO attempts (job_id, seq, start_at, start_type) "
                                 "VALUES ('j', 1, 0, 'init_or_rescheduled')"))
        db.upgrade(engine)
        with engine.connect() as conn:
            job = job_repo.job_by_id(conn, "j")
            [attempt] = job_repo.attempts_of(conn, "j")
        assert job is not None
        assert (job.failure_class, job.restart_at, job.stop_cause, job.excluded_nodes) == (
            "stopped", None, None, None)
        assert attempt.failure_class is None
        db.downgrade(engine, "0010")
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT failure_class FROM jobs")).scalar_one() == (
                "terminated")
            columns = list(conn.execute(sa.text("SELECT * FROM jobs")).keys())
            assert "stop_cause" not in columns
        db.upgrade(engine)
    finally:
        engine.dispose()


def test_last_use_tells_busy_samples_from_idle_ones(db_url: str) -> None:
    store = db.Store(db_url)
    try:
        store.migrate()
        with store.begin() as conn:
            _old_job(conn, "Running", "Running")  # one core per task
            job_repo.add_samples(conn, [
                {"job_id": "j", "attempt": 1, "task": task, "time": t, "cpu_usage": cpu,
                 "mem_usage": 1.0, "mem_mb": 1.0, "gpu_util": gpu, "gpu_mem_usage": 0.0}
                for task, t, cpu, gpu in [("worker-0", 10, 50.0, 0.0), ("worker-0", 20, 0.5, 0.0),
                                          ("worker-1", 10, 0.0, 0.0), ("worker-1", 30, 0.0, 80.0),
                                          ("worker-2", 40, 0.2, 0.0)]])
        with store.read() as conn:
            use = job_repo.last_use(conn, "j", 1, cpu=1.0, gpu=1.0)
            other = job_repo.last_use(conn, "j", 2, cpu=1.0, gpu=1.0)
        assert use == {"worker-0": (10, 20), "worker-1": (30, 30), "worker-2": (None, 40)}
        assert other == {}
    finally:
        store.dispose()
