"""The scheduler's SQL on SQLite and PostgreSQL: the queue window per stream, queue
positions in the scheduler's order, quotas, usage, and the migrations over old rows."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import sqlalchemy as sa

from corral.domain import resources, scheduling
from corral.services import catalog as catalog_mod
from corral.services import pools
from corral.store import db, job_repo, queue_repo, rows, schema
from tests.integration.test_store import NOW, catalog, create, project  # noqa: F401


def prio(p: int) -> dict[str, Any]:
    return {"spec": {"resource": {"flavor_id": "corral.cpu.1u", "node_count": 1},
                     "schedule_policy": {"priority": p}}}


def test_the_queue_window_takes_the_first_jobs_of_each_stream(
        store: db.Store, catalog: catalog_mod.Catalog, project: str) -> None:  # noqa: F811
    low = [create(store, catalog, project, **prio(1)) for _ in range(4)]
    high = [create(store, catalog, project, **prio(3)) for _ in range(2)]
    with store.read() as conn:
        window = queue_repo.queued(conn, limit=2)
    assert [r.id for r in window] == [low[0], low[1], high[0], high[1]]
    assert {r.priority for r in window} == {1, 3}
    assert all(r.pool_id == "default" for r in window)


def test_the_queue_s_written_out_condition_names_the_waiting_phases() -> None:
    # (written out for the partial index; it must not drift from the phases' own names)
    phases = ", ".join(f"'{p}'" for p in queue_repo.WAITING)
    assert f"phase IN ({phases}) AND staging IS NULL" == schema.IN_QUEUE_SQL


def test_the_window_is_read_stream_by_stream_through_the_queue_s_own_index(
        store: db.Store, catalog: catalog_mod.Catalog, project: str,  # noqa: F811
        monkeypatch: Any) -> None:
    monkeypatch.setattr(queue_repo, "STREAMS_PER_READ", 4)  # six streams: two reads
    with store.begin() as conn:
        for other in ("second", "third"):
            conn.execute(schema.projects.insert().values(id=other, name=other, created_at=0))
    made = [[create(store, catalog, who, **prio(p)) for _ in range(3)]
            for who in (project, "second", "third") for p in (1, 3)]
    done = create(store, catalog, project)
    with store.begin() as conn:
        conn.execute(schema.jobs.update().where(schema.jobs.c.id == done)
                     .values(phase="Completed"))
    statements: list[tuple[str, Any]] = []

    def note(_c: Any, _k: Any, statement: str, params: Any, *_: Any) -> None:
        if statement.startswith("SELECT"):
            statements.append((statement, params))

    with store.read() as conn:
        sa.event.listen(store.engine, "before_cursor_execute", note)
        window = queue_repo.queued(conn, limit=2)
        sa.event.remove(store.engine, "before_cursor_execute", note)
        plans = [" ".join(str(r[-1]) for r in conn.exec_driver_sql(
                     "EXPLAIN QUERY PLAN " + statement, params))
                 for statement, params in statements] if store.is_sqlite else []
    assert [r.id for r in window] == [j for stream in made for j in stream[:2]]
    # Neither the rest of the queue nor the jobs that ended are gone through (a long queue
    # cost every pass a sort of all of it): only the index of the queued jobs, in order.
    assert len(plans) == (3 if store.is_sqlite else 0)  # the streams, then two reads
    for plan in plans:
        assert "ix_jobs_queue" in plan and "TEMP B-TREE" not in plan, plan


def test_positions_follow_priority_the_last_head_fair_share_and_submission(
        store: db.Store, catalog: catalog_mod.Catalog, project: str) -> None:  # noqa: F811
    """The same order as domain.scheduling.queue_order, computed by the database."""
    with store.begin() as conn:
        conn.execute(schema.projects.insert().values(id="busy", name="busy", created_at=0))
        conn.execute(schema.projects.insert().values(id="idle", name="idle", created_at=0))
        queue_repo.save_usage(conn, [rows.Usage(project_id="busy", pool_id="default",
                                                share=0.5, updated_at=NOW)])
        queue_repo.set_quotas(conn, "idle", [{"pool_id": "default", "cpu": None, "memory_mb": None,
                                        "gpu": None, "borrowing": False, "weight": 2.0}], NOW)
    busy = [create(store, catalog, "busy", **prio(1)) for _ in range(2)]
    idle = [create(store, catalog, "idle", **prio(1)) for _ in range(2)]
    mine = [create(store, catalog, project, **prio(1)), create(store, catalog, project,
                                                              **prio(3))]
    with store.begin() as conn:  # the idle project now holds one of the 2 cores
        conn.execute(schema.jobs.update().where(schema.jobs.c.id == idle[0])
                     .values(phase="Running"))
        conn.execute(schema.jobs.update().where(schema.jobs.c.id == busy[1])
                     .values(wait_code="no_capacity"))
    everyone = [*busy, *idle, *mine]
    with store.read() as conn:
        ahead = pools.jobs_ahead(conn, catalog, everyone)  # a page: ranked in one query
        one_by_one = {j: n for j in everyone  # a few: counted
                      for j, n in pools.jobs_ahead(conn, catalog, [j]).items()}
        listed = [j["id"] for j in pools.queue(conn, catalog, "busy")[0]["jobs"]]
    assert one_by_one == ahead
    # Priority 3 first; then the last head; then by key: mine 0 (nothing used), idle 0.25
    # (it holds half the cores, at weight 2), busy 0.5 (its recent usage).
    assert ahead == {mine[1]: 0, busy[1]: 1, mine[0]: 2, idle[1]: 3, busy[0]: 4}
    assert listed == [None, busy[1], None, None, busy[0]]
    queue = [scheduling.Queued(r.id, r.project_id, r.pool_id, resources.ZERO, 1, r.priority,
                               r.seq, was_head=r.wait_code == "no_capacity")
             for r in _rows(store, [j for j in everyone if j != idle[0]])]
    order = scheduling.queue_order(queue, catalog.scheduling_nodes(),
                                   {("idle", "default"): resources.Resources(1, 4096)},
                                   [scheduling.Quota("idle", "default", weight=2.0)],
                                   {("busy", "default"): 0.5})
    assert [q.job_id for q in order["default"]] == sorted(ahead, key=ahead.__getitem__)


def _rows(store: db.Store, ids: list[str]) -> list[Any]:
    with store.read() as conn:
        return list(conn.execute(sa.select(schema.jobs).where(schema.jobs.c.id.in_(ids))))


def test_the_window_of_a_stream_is_its_first_jobs_without_those_staging(
        store: db.Store, catalog: catalog_mod.Catalog, project: str) -> None:  # noqa: F811
    jobs = [create(store, catalog, project) for _ in range(6)]
    with store.begin() as conn:
        conn.execute(schema.jobs.update().where(schema.jobs.c.id == jobs[1])
                     .values(staging="pending"))
        # Admitted and new jobs interleave: the window merges them in submission order.
        conn.execute(schema.jobs.update().where(schema.jobs.c.id.in_([jobs[2], jobs[5]]))
                     .values(phase="Pending", secondary_phase="Queuing"))
        window = queue_repo.queued(conn, limit=3)
    assert [r.id for r in window] == [jobs[0], jobs[2], jobs[3]]


def test_quotas_and_usage_round_trip(store: db.Store, project: str) -> None:  # noqa: F811
    quotas = [{"pool_id": "default", "cpu": 2.5, "memory_mb": 4096, "gpu": None,
               "borrowing": True, "weight": 2.0}]
    with store.begin() as conn:
        queue_repo.set_quotas(conn, project, quotas, NOW)
        queue_repo.save_usage(conn, [rows.Usage(project_id=project, pool_id="default",
                                                share=0.25, updated_at=NOW)])
    with store.read() as conn:
        [q] = queue_repo.quotas(conn, project)
        [u] = queue_repo.usage(conn)
    assert (q.cpu, q.memory_mb, q.gpu, q.borrowing, q.weight) == (2.5, 4096, None, True, 2.0)
    assert (u.share, u.updated_at) == (0.25, NOW)
    with store.begin() as conn:
        queue_repo.set_quotas(conn, project, [], NOW)
        assert queue_repo.quotas(conn) == []


def _old_job(conn: sa.Connection, phase: str, secondary: str) -> None:
    """Project 'p' and its job 'j' as a schema before the scheduling fields had them."""
    conn.execute(sa.text("INSERT INTO projects (id, name, created_at) VALUES ('p', 'p', 0)"))
    conn.execute(sa.text(
        "INSERT INTO jobs (id, seq, project_id, name, description, kind, user_name, phase, "
        "secondary_phase, spec, flavor_id, node_count, cpu, memory_mb, gpu, retry_limit, "
        "create_time, updated_at) VALUES ('j', 1, 'p', 'old', '', 'job', '', :phase, "
        ":secondary, '{}', 'f', 1, 1, 1024, 0, 0, 0, 0)"), {"phase": phase, "secondary": secondary})


@contextlib.contextmanager
def _migrated_from(db_url: str, revision: str, phase: str, secondary: str,
                   ) -> Iterator[sa.Engine]:
    """A database at `revision` given the old job (`_old_job`), then brought up to date."""
    engine = db.make_engine(db_url)
    try:
        db.upgrade(engine, revision)
        with engine.begin() as conn:
            _old_job(conn, phase, secondary)
        db.upgrade(engine)
        yield engine
    finally:
        engine.dispose()


def test_migration_0003_fills_scheduling_fields_of_existing_jobs(db_url: str) -> None:
    with _migrated_from(db_url, "0001", "Pending", "Queuing") as engine:
        with engine.connect() as conn:
            row = conn.execute(sa.select(schema.jobs)).one()
        assert (row.pool_id, row.priority, row.preemptible, row.borrowed, row.wait_code) == (
            "default", 1, False, False, None)
        db.downgrade(engine, "0001")  # and back down, and up again
        db.upgrade(engine)


def test_migration_0005_keeps_jobs_and_tasks_and_goes_back_down(db_url: str) -> None:
    engine = db.make_engine(db_url)
    try:
        db.upgrade(engine, "0004")
        with engine.begin() as conn:
            _old_job(conn, "Running", "Running")
            conn.execute(sa.text(
                "INSERT INTO tasks (job_id, attempt, name, rank, node, state, launch_id, "
                "gpu_ids) VALUES ('j', 1, 'worker-0', 0, 'local', 'running', 'l', '')"))
        db.upgrade(engine)
        with engine.begin() as conn:
            job = conn.execute(sa.select(schema.jobs)).one()
            task = conn.execute(sa.select(schema.tasks)).one()
            assert (job.accelerators, task.accel_ids) == (None, None)
            conn.execute(schema.jobs.update().values(accelerators='{"npu": 2}'))
            conn.execute(schema.tasks.update().values(accel_ids='{"npu": [0, 1]}'))
            conn.execute(schema.quotas.insert().values(
                project_id="p", pool_id="default", accelerators='{"npu": 0}', updated_at=0))
        with engine.connect() as conn:
            [(held,)] = [(resources.parse_accels(r.accelerators),) for r in
                         conn.execute(sa.select(schema.jobs))]
        assert held == (("npu", 2),)
        db.downgrade(engine, "0004")  # and back down: old columns and rows untouched
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT count(*) FROM tasks")).scalar_one() == 1
            columns = list(conn.execute(sa.text("SELECT * FROM jobs")).keys())
            assert "accelerators" not in columns
        db.upgrade(engine)
    finally:
        engine.dispose()


def test_migration_0006_indexes_what_would_read_the_whole_history(db_url: str) -> None:
    """Every reconciler pass looks for deleted jobs and every submission for its name and
    the next number: with the indexes those read a few rows, not the whole history."""
    with _migrated_from(db_url, "0005", "Completed", "Completed") as engine:
        indexes = {i["name"]: i["column_names"] for i in sa.inspect(engine).get_indexes("jobs")}
        assert indexes["ix_jobs_deleted"] == ["deleted_at"]
        assert indexes["ix_jobs_project_name"] == ["project_id", "name", "deleted_at"]
        assert indexes["ix_jobs_seq"] == ["seq"]
        assert indexes["ix_jobs_project_live"] == ["project_id", "deleted_at", "phase",
                                                   "create_time", "name"]
        with engine.begin() as conn:
            assert job_repo.deleted_jobs(conn) == []
            assert job_repo.name_taken(conn, "p", "old")
            assert not job_repo.name_taken(conn, "p", "new")
            conn.execute(schema.jobs.update().values(deleted_at=NOW))
            assert [(r.id, r.phase) for r in job_repo.deleted_jobs(conn)] == [("j", "Completed")]
            if engine.dialect.name == "sqlite":
                for sql, index in (
                        ("SELECT id, phase FROM jobs WHERE deleted_at IS NOT NULL",
                         "ix_jobs_deleted"),
                        ("SELECT id FROM jobs WHERE project_id = 'p' AND name = 'old' AND "
                         "deleted_at IS NULL", "ix_jobs_project_name"),
                        ("SELECT max(seq) FROM jobs", "ix_jobs_seq"),
                        ("SELECT count(*) FROM jobs WHERE project_id = 'p' AND "
                         "deleted_at IS NULL", "ix_jobs_project_live")):
                    plan = " ".join(str(r) for r in conn.exec_driver_sql(
                        "EXPLAIN QUERY PLAN " + sql))
                    assert index in plan, plan
        db.downgrade(engine, "0005")
        left = {i["name"] for i in sa.inspect(engine).get_indexes("jobs")}
        assert not left & {"ix_jobs_deleted", "ix_jobs_project_name", "ix_jobs_seq",
                           "ix_jobs_project_live"}
        db.upgrade(engine)


def test_the_schedulers_guarded_writes_skip_a_job_that_moved_on(
        store: db.Store, catalog: catalog_mod.Catalog, project: str) -> None:  # noqa: F811
    """A reason only for a job that still waits, a preemption only of one that still runs
    (and once): what the reconciler decided from an older snapshot."""
    waits, stopped, runs = (create(store, catalog, project) for _ in range(3))
    with store.begin() as conn:
        job_repo.request_terminate(conn, stopped, NOW, "Termination requested")
        conn.execute(schema.jobs.update().where(schema.jobs.c.id == runs)
                     .values(phase="Running", secondary_phase="Running"))
    with store.begin() as conn:
        assert job_repo.note_wait(conn, waits, now=NOW, reason="no room", code="resources")
        assert not job_repo.note_wait(conn, stopped, now=NOW, reason="no room", code="resources")
        assert not job_repo.request_preempt(conn, waits, NOW)
        assert job_repo.request_preempt(conn, runs, NOW)
        assert not job_repo.request_preempt(conn, runs, NOW + 1)
    with store.read() as conn:
        rows = {j: job_repo.job_by_id(conn, j) for j in (waits, stopped, runs)}
    assert (rows[waits].wait_code, rows[waits].wait_reason) == ("resources", "no room")
    assert rows[stopped].wait_code is None
    assert rows[runs].preempt_requested_at == NOW
    assert rows[waits].preempt_requested_at is None


def test_migration_0017_leaves_existing_jobs_unpinned_and_goes_back_down(db_url: str) -> None:
    with _migrated_from(db_url, "0016", "Pending", "Queuing") as engine:
        with engine.connect() as conn:
            assert conn.execute(sa.select(schema.jobs.c.node_name)).scalar_one() == ""
            assert [j.node_name for j in queue_repo.queued(conn, 10)] == [""]
        db.downgrade(engine, "0016")
        with engine.connect() as conn:
            columns = list(conn.execute(sa.text("SELECT * FROM jobs")).keys())
            assert "node_name" not in columns
        db.upgrade(engine)
