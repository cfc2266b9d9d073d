"""The store on a real database: every test runs on SQLite and on PostgreSQL."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest
import sqlalchemy as sa

from corral.domain import errors, jobs, resources, specs
from corral.services import catalog as catalog_mod
from corral.services import submit
from corral.store import db, identity_repo, job_repo, schema
from tests import conftest, factories

NOW = 1_700_000_000_000


@pytest.fixture
def catalog(tmp_path: pathlib.Path) -> catalog_mod.Catalog:
    node = resources.Node(name="local", cpu=2, memory_mb=8192)
    return catalog_mod.Catalog.build(conftest.make_settings(tmp_path / "home"), [node])


@pytest.fixture
def project(store: db.Store) -> str:
    with store.begin() as conn:
        return identity_repo.ensure_default_project(conn, NOW)


def create(
    store: db.Store, cat: catalog_mod.Catalog, project_id: str, *, now: int = NOW, **overrides: Any
) -> str:
    body = specs.JobCreate.model_validate(factories.make_job(command="true", **overrides))
    with store.begin() as conn:
        return submit.create_job(conn, cat, body, project_id=project_id, now=now)


def phase_of(store: db.Store, job_id: str) -> str:
    with store.read() as conn:
        row = job_repo.job_by_id(conn, job_id)
    assert row is not None
    return str(row.phase)


def event_messages(store: db.Store, job_id: str) -> list[str]:
    with store.read() as conn:
        _total, rows = job_repo.list_events(conn, job_id, offset=0, limit=1000, order="asc")
    return [r.message for r in rows]


def count_rows(store: db.Store, table: sa.Table, job_id: str) -> int:
    col = table.c.id if table is schema.jobs else table.c.job_id
    with store.read() as conn:
        q = sa.select(sa.func.count()).select_from(table).where(col == job_id)
        return int(conn.execute(q).scalar_one())


# --- migrations and projects ------------------------------------------------------------


def test_migrations_create_every_table(store: db.Store) -> None:
    tables = set(sa.inspect(store.engine).get_table_names())

    assert {
        "meta",
        "projects",
        "jobs",
        "attempts",
        "tasks",
        "job_events",
        "task_metrics",
        "alembic_version",
    } <= tables


def test_migrating_again_is_a_no_op(
    store: db.Store, catalog: catalog_mod.Catalog, project: str
) -> None:
    job_id = create(store, catalog, project, name="kept")

    store.migrate()

    with store.read() as conn:
        versions = conn.execute(sa.text("SELECT version_num FROM alembic_version")).all()
        assert job_repo.get_job(conn, project, job_id).name == "kept"
    assert len(versions) == 1


def test_a_second_store_on_the_same_database_migrates_cleanly(store: db.Store) -> None:
    with store.begin() as conn:
        pid = identity_repo.ensure_default_project(conn, NOW)

    second = db.Store(store.url)
    try:
        second.migrate()
        with second.begin() as conn:
            assert identity_repo.ensure_default_project(conn, NOW + 1) == pid
    finally:
        second.dispose()


def test_default_project_is_created_once(store: db.Store) -> None:
    with store.begin() as conn:
        first = identity_repo.ensure_default_project(conn, NOW)
    with store.begin() as conn:
        second = identity_repo.ensure_default_project(conn, NOW + 5)
        identity_repo.require_project(conn, first)

    assert first == second
    assert len(first) == 32
    with store.read() as conn:
        assert (
            conn.execute(sa.select(sa.func.count()).select_from(schema.projects)).scalar_one() == 1
        )


def test_an_unknown_project_is_refused(store: db.Store, project: str) -> None:
    with store.read() as conn, pytest.raises(errors.ProjectNotFound):
        identity_repo.require_project(conn, "0" * 32)


# --- jobs -------------------------------------------------------------------------------


def test_created_job_reads_back(
    store: db.Store, catalog: catalog_mod.Catalog, project: str
) -> None:
    job_id = create(store, catalog, project, name="round-trip", retries=2, environments={"A": "1"})

    with store.read() as conn:
        row = job_repo.get_job(conn, project, job_id)
        spec = job_repo.job_spec(row)
    assert row.name == "round-trip"
    assert row.phase == jobs.Phase.CREATING.value
    assert row.secondary_phase == jobs.SecondaryPhase.CREATING.value
    assert row.create_time == NOW
    assert row.flavor_id == "corral.cpu.1u"
    assert (row.cpu, row.node_count, row.retry_limit) == (1.0, 1, 2)
    assert spec.algorithm.command == "true"
    assert spec.algorithm.environments == {"A": "1"}
    assert spec.algorithm.engine is not None and spec.algorithm.engine.engine_id
    assert event_messages(store, job_id) == [
        f"Job created: flavor corral.cpu.1u, 1 node(s), engine {spec.algorithm.engine.engine_id}"
    ]


def test_a_live_name_cannot_be_taken_twice(
    store: db.Store, catalog: catalog_mod.Catalog, project: str
) -> None:
    create(store, catalog, project, name="twin")

    with pytest.raises(errors.DuplicateName):
        create(store, catalog, project, name="twin")

    with store.read() as conn:
        total, count, _rows = job_repo.search_jobs(conn, project, specs.Search())
    assert (total, count) == (1, 1)


def test_a_deleted_job_frees_its_name(
    store: db.Store, catalog: catalog_mod.Catalog, project: str
) -> None:
    old = create(store, catalog, project, name="reused")
    with store.begin() as conn:
        job_repo.mark_deleted(conn, old, NOW + 1)

    new = create(store, catalog, project, name="reused", now=NOW + 2)

    assert new != old
    with store.read() as conn:
        assert job_repo.get_job(conn, project, new).name == "reused"
        with pytest.raises(errors.NotFound):
            job_repo.get_job(conn, project, old)
        assert [d.id for d in job_repo.deleted_jobs(conn)] == [old]


def test_a_job_is_invisible_from_another_project(
    store: db.Store, catalog: catalog_mod.Catalog, project: str
) -> None:
    job_id = create(store, catalog, project)
    other = "f" * 32
    with store.begin() as conn:
        conn.execute(schema.projects.insert().values(id=other, name="other", created_at=NOW))

    with store.read() as conn:
        with pytest.raises(errors.NotFound):
            job_repo.get_job(conn, other, job_id)
        total, count, rows = job_repo.search_jobs(conn, other, specs.Search())
    assert (total, count, rows) == (0, 0, [])


def test_the_same_name_may_live_in_two_projects(
    store: db.Store, catalog: catalog_mod.Catalog, project: str
) -> None:
    other = "e" * 32
    with store.begin() as conn:
        conn.execute(schema.projects.insert().values(id=other, name="other", created_at=NOW))
    create(store, catalog, project, name="shared")

    job_id = create(store, catalog, other, name="shared")

    with store.read() as conn:
        assert job_repo.get_job(conn, other, job_id).project_id == other


# --- transitions ------------------------------------------------------------------------


def test_transition_not_in_the_table_changes_nothing(
    store: db.Store, catalog: catalog_mod.Catalog, project: str
) -> None:
    job_id = create(store, catalog, project)
    before = event_messages(store, job_id)

    with store.begin() as conn:
        moved = job_repo.transition(
            conn,
            job_id,
            jobs.Phase.COMPLETED,
            jobs.SecondaryPhase.COMPLETED,
            now=NOW + 1,
            message="should not happen",
        )

    assert moved is False
    assert phase_of(store, job_id) == jobs.Phase.CREATING.value
    assert event_messages(store, job_id) == before


def test_allowed_transition_writes_exactly_one_event(
    store: db.Store, catalog: catalog_mod.Catalog, project: str
) -> None:
    job_id = create(store, catalog, project)
    before = event_messages(store, job_id)

    with store.begin() as conn:
        moved = job_repo.transition(
            conn,
            job_id,
            jobs.Phase.PENDING,
            jobs.SecondaryPhase.QUEUING,
            now=NOW + 1,
            message="Job queued",
            level="Info",
            fields={"wait_reason": "busy"},
        )

    assert moved is True
    with store.read() as conn:
        row = job_repo.job_by_id(conn, job_id)
    assert row is not None
    assert (row.phase, row.secondary_phase) == ("Pending", "Queuing")
    assert row.wait_reason == "busy"
    assert row.updated_at == NOW + 1
    assert event_messages(store, job_id) == [*before, "Job queued"]


def test_a_finished_job_never_moves_again(
    store: db.Store, catalog: catalog_mod.Catalog, project: str
) -> None:
    job_id = create(store, catalog, project)
    path = [
        (jobs.Phase.PENDING, jobs.SecondaryPhase.QUEUING),
        (jobs.Phase.RUNNING, jobs.SecondaryPhase.RUNNING),
        (jobs.Phase.COMPLETED, jobs.SecondaryPhase.COMPLETED),
    ]
    with store.begin() as conn:
        for phase, secondary in path:
            assert job_repo.transition(conn, job_id, phase, secondary, now=NOW, message=phase)
    events = event_messages(store, job_id)

    with store.begin() as conn:
        stop = (jobs.Phase.TERMINATING, jobs.SecondaryPhase.TERMINATING)
        results = [
            job_repo.transition(conn, job_id, phase, secondary, now=NOW, message="again")
            for phase, secondary in [*path, stop]
        ]
        terminated = job_repo.request_terminate(conn, job_id, NOW, "stop")

    assert results == [False] * 4
    assert terminated is False
    assert phase_of(store, job_id) == "Completed"
    assert event_messages(store, job_id) == events


def test_a_rolled_back_transition_leaves_no_event(
    store: db.Store, catalog: catalog_mod.Catalog, project: str
) -> None:
    job_id = create(store, catalog, project)
    before = event_messages(store, job_id)

    with pytest.raises(RuntimeError), store.begin() as conn:
        job_repo.transition(conn, job_id, jobs.Phase.PENDING, jobs.SecondaryPhase.QUEUING,
                            now=NOW, message="Job queued")
        raise RuntimeError("caller failed after the transition")

    assert phase_of(store, job_id) == "Creating"
    assert event_messages(store, job_id) == before


# --- searching --------------------------------------------------------------------------


@pytest.fixture
def five_jobs(store: db.Store, catalog: catalog_mod.Catalog, project: str) -> dict[str, str]:
    """alpha-1..3 and beta-1..2 created a second apart; alpha-2 and beta-1 are Pending."""
    names = ["alpha-1", "alpha-2", "beta-1", "alpha-3", "beta-2"]
    ids = {
        n: create(store, catalog, project, name=n, now=NOW + i * 1000) for i, n in enumerate(names)
    }
    with store.begin() as conn:
        for n in ("alpha-2", "beta-1"):
            job_repo.transition(
                conn,
                ids[n],
                jobs.Phase.PENDING,
                jobs.SecondaryPhase.QUEUING,
                now=NOW,
                message="Job queued",
            )
    return ids


def search(store: db.Store, project: str, **body: Any) -> tuple[int, int, list[str]]:
    with store.read() as conn:
        total, count, rows = job_repo.search_jobs(conn, project, specs.Search.model_validate(body))
    return total, count, [r.name for r in rows]


def test_search_without_filters_lists_newest_first(
    store: db.Store, project: str, five_jobs: dict[str, str]
) -> None:
    assert search(store, project) == (5, 5, ["beta-2", "alpha-3", "beta-1", "alpha-2", "alpha-1"])


def test_search_like_matches_a_substring_of_the_name(
    store: db.Store, project: str, five_jobs: dict[str, str]
) -> None:
    total, count, names = search(
        store,
        project,
        filters=[{"key": "name", "operator": "like", "value": ["lpha"]}],
        order="asc",
    )

    assert (total, count) == (5, 3)
    assert names == ["alpha-1", "alpha-2", "alpha-3"]


def test_search_like_takes_wildcards_literally(
    store: db.Store, project: str, five_jobs: dict[str, str]
) -> None:
    assert (
        search(store, project, filters=[{"key": "name", "operator": "like", "value": ["a%"]}])[1]
        == 0
    )
    assert (
        search(store, project, filters=[{"key": "name", "operator": "like", "value": ["_"]}])[1]
        == 0
    )


def test_search_in_and_not_on_phase(
    store: db.Store, project: str, five_jobs: dict[str, str]
) -> None:
    pending = search(
        store,
        project,
        filters=[{"key": "phase", "operator": "in", "value": ["Pending"]}],
        sort_by="name",
        order="asc",
    )
    others = search(
        store,
        project,
        filters=[{"key": "phase", "operator": "not", "value": ["Pending"]}],
        sort_by="name",
        order="asc",
    )

    assert pending == (5, 2, ["alpha-2", "beta-1"])
    assert others == (5, 3, ["alpha-1", "alpha-3", "beta-2"])


def test_search_between_on_create_time_is_inclusive(
    store: db.Store, project: str, five_jobs: dict[str, str]
) -> None:
    found = search(
        store,
        project,
        order="asc",
        filters=[{"key": "create_time", "operator": "between", "value": [NOW + 1000, NOW + 3000]}],
    )

    assert found == (5, 3, ["alpha-2", "beta-1", "alpha-3"])


def test_search_combines_filters(store: db.Store, project: str, five_jobs: dict[str, str]) -> None:
    found = search(
        store,
        project,
        filters=[
            {"key": "name", "operator": "like", "value": ["beta"]},
            {"key": "phase", "operator": "not", "value": ["Pending"]},
        ],
    )

    assert found == (5, 1, ["beta-2"])


def test_search_sorts_by_name_either_way(
    store: db.Store, project: str, five_jobs: dict[str, str]
) -> None:
    asc = search(store, project, sort_by="name", order="asc")[2]
    desc = search(store, project, sort_by="name", order="desc")[2]

    assert asc == sorted(five_jobs)
    assert desc == sorted(five_jobs, reverse=True)


def test_search_offset_counts_pages(
    store: db.Store, project: str, five_jobs: dict[str, str]
) -> None:
    pages = [
        search(store, project, sort_by="name", order="asc", limit=2, offset=i) for i in range(4)
    ]

    assert [p[2] for p in pages] == [["alpha-1", "alpha-2"], ["alpha-3", "beta-1"], ["beta-2"], []]
    assert all(p[:2] == (5, 5) for p in pages)


def test_search_skips_deleted_jobs(
    store: db.Store, project: str, five_jobs: dict[str, str]
) -> None:
    with store.begin() as conn:
        job_repo.mark_deleted(conn, five_jobs["alpha-1"], NOW + 9000)

    total, count, names = search(store, project)

    assert (total, count) == (4, 4)
    assert "alpha-1" not in names


# --- events -----------------------------------------------------------------------------


@pytest.fixture
def noisy_job(store: db.Store, catalog: catalog_mod.Catalog, project: str) -> str:
    """A job with its creation event plus 10 more: every third a Warning, one with a '%'."""
    job_id = create(store, catalog, project)
    with store.begin() as conn:
        for i in range(10):
            level = "Warning" if i % 3 == 0 else "Info"
            job_repo.add_event(
                conn, job_id, NOW + i, f"step {i}{' at 50%' if i == 7 else ''}", level=level
            )
    return job_id


def events(store: db.Store, job_id: str, **kw: Any) -> tuple[int, list[str]]:
    args: dict[str, Any] = {"offset": 0, "limit": 100, "order": "asc", **kw}
    with store.read() as conn:
        total, rows = job_repo.list_events(conn, job_id, **args)
    return total, [r.message for r in rows]


def test_events_page_in_order(store: db.Store, noisy_job: str) -> None:
    total, first = events(store, noisy_job, limit=4)
    _, second = events(store, noisy_job, offset=4, limit=4)

    assert total == 11
    assert first[0].startswith("Job created")
    assert first[1:] + second == [f"step {i}" for i in range(7)]


def test_events_newest_first(store: db.Store, noisy_job: str) -> None:
    total, newest = events(store, noisy_job, order="desc", limit=3)

    assert total == 11
    assert newest == ["step 9", "step 8", "step 7 at 50%"]


def test_events_filtered_by_level(store: db.Store, noisy_job: str) -> None:
    total, warnings = events(store, noisy_job, level="Warning")

    assert total == 4
    assert warnings == ["step 0", "step 3", "step 6", "step 9"]


def test_events_filtered_by_pattern(store: db.Store, noisy_job: str) -> None:
    assert events(store, noisy_job, pattern="50%") == (1, ["step 7 at 50%"])
    assert events(store, noisy_job, pattern="%")[0] == 1
    assert events(store, noisy_job, pattern="nothing like this") == (0, [])


def test_events_within_a_time_window(store: db.Store, noisy_job: str) -> None:
    total, found = events(store, noisy_job, start_time=NOW + 2, end_time=NOW + 4)

    assert total == 3
    assert found == ["step 2", "step 3", "step 4"]


# --- purge ------------------------------------------------------------------------------


def test_purge_removes_the_job_and_everything_it_owns(
    store: db.Store, catalog: catalog_mod.Catalog, project: str
) -> None:
    doomed = create(store, catalog, project, name="doomed")
    kept = create(store, catalog, project, name="kept")
    for job_id in (doomed, kept):
        with store.begin() as conn:
            job_repo.open_attempt(conn, job_id, 1, NOW, jobs.StartType.INIT_OR_RESCHEDULED)
            job_repo.insert_tasks(conn, [factories.make_task(job_id, state="exited")])
            job_repo.add_samples(
                conn,
                [
                    {
                        "job_id": job_id,
                        "attempt": 1,
                        "task": "worker-0",
                        "time": NOW,
                        "cpu_usage": 1.0,
                        "mem_usage": 1.0,
                        "mem_mb": 1.0,
                        "gpu_util": 0.0,
                        "gpu_mem_usage": 0.0,
                    }
                ],
            )
    with store.begin() as conn:
        job_repo.mark_deleted(conn, doomed, NOW)

    with store.begin() as conn:
        job_repo.purge_job(conn, doomed)

    tables = (schema.jobs, schema.attempts, schema.tasks, schema.job_events, schema.task_metrics)
    assert [count_rows(store, t, doomed) for t in tables] == [0, 0, 0, 0, 0]
    assert [count_rows(store, t, kept) for t in tables] == [1, 1, 1, 1, 1]
    with store.read() as conn:
        assert job_repo.job_by_id(conn, doomed) is None
        assert job_repo.deleted_jobs(conn) == []


def test_sqlite_writes_take_the_lock_at_begin_and_reads_do_not(tmp_path: pathlib.Path) -> None:
    """Store.begin is BEGIN IMMEDIATE on SQLite (a second writer queues at once instead of
    failing when it upgrades), Store.read a deferred BEGIN that leaves writers alone; and
    the engine has no per-statement event listeners (they cost every query time)."""
    import sqlite3

    store = db.Store(f"sqlite:///{tmp_path / 'state.db'}")
    store.migrate()
    other = sqlite3.connect(tmp_path / "state.db", timeout=0, isolation_level=None)
    with store.begin() as conn:
        conn.execute(sa.select(sa.literal(1))).scalar()
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            other.execute("BEGIN IMMEDIATE")
        assert conn.connection.driver_connection.in_transaction  # type: ignore[union-attr]
    other.execute("BEGIN IMMEDIATE")  # free again once committed
    other.execute("ROLLBACK")
    with store.read() as conn:
        conn.execute(sa.select(sa.literal(1))).scalar()
        other.execute("BEGIN IMMEDIATE")  # a reader does not hold the write lock
        other.execute("ROLLBACK")
    # A failed write rolls back and leaves the pooled connection usable for reads.
    with pytest.raises(RuntimeError), store.begin() as conn:
        conn.execute(sa.insert(schema.projects).values(id="p-rollback", name="rollback",
                                                       created_at=NOW))
        raise RuntimeError("boom")
    with store.read() as conn:
        assert conn.execute(sa.select(schema.projects.c.id).where(
            schema.projects.c.id == "p-rollback")).first() is None
        other.execute("BEGIN IMMEDIATE")
        other.execute("ROLLBACK")
    other.close()
    store.dispose()
