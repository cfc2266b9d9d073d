"""Retention: ended jobs' logs and records removed by age and by count, per project, never
a job that registered a model; and the API and CLI that show and apply it."""

from __future__ import annotations

import pathlib
import time
from typing import Any

from click import testing

from corral.cli import main, state
from corral.services import catalog as catalog_mod
from corral.services import retention
from corral.storage import runs
from corral.store import db, job_repo, model_repo, schema
from tests import conftest, factories
from tests.integration.test_store import NOW, catalog, create, project  # noqa: F401

DAY = retention.DAY_MS


def ended(store: db.Store, cat: catalog_mod.Catalog, project_id: str, name: str,
          days_ago: float, settings: Any = None) -> str:
    """A job that ended `days_ago` days before NOW and that the storage component is done
    with; with `settings`, its run folder exists."""
    job_id = create(store, cat, project_id, name=name)
    end = int(NOW - days_ago * DAY)
    with store.begin() as conn:
        conn.execute(schema.jobs.update().where(schema.jobs.c.id == job_id).values(
            phase="Completed", secondary_phase="Completed", end_time=end, finalized_at=end))
    if settings is not None:
        runs.RunPaths(settings.runs_dir, job_id).make_attempt_dirs(1)
    return job_id


def with_model(store: db.Store, project_id: str, job_id: str) -> None:
    with store.begin() as conn:
        model = model_repo.ensure(conn, project_id, "kept", NOW)
        model_repo.add_version(conn, {
            "model_id": model.id, "version": 1, "created_at": NOW, "location": "/m/1",
            "size_bytes": 1, "file_count": 1, "source_job_id": job_id,
            "source_job_name": "x", "source_channel": "train_url", "source_phase": "Completed"})


def names(removals: list[retention.Removal]) -> list[str]:
    return sorted(r.name for r in removals)


def test_records_go_by_age_and_by_count_logs_by_age_and_models_stay(
        store: db.Store, catalog: catalog_mod.Catalog, project: str,  # noqa: F811
        tmp_path: pathlib.Path) -> None:
    settings = conftest.make_settings(tmp_path / "home", retention={
        "logs_days": 7, "records_days": 90, "records_keep": 3})
    fresh = ended(store, catalog, project, "fresh", 1, settings)
    week = ended(store, catalog, project, "week", 10, settings)
    month = ended(store, catalog, project, "month", 40, settings)
    old = ended(store, catalog, project, "old", 100, settings)
    modelled = ended(store, catalog, project, "modelled", 200, settings)
    with_model(store, project, modelled)
    running = create(store, catalog, project, name="running")
    with store.read() as conn:
        todo = retention.plan(conn, settings, NOW)
    # Newest first: fresh, week, month are the three kept; old is beyond them (and old);
    # the modelled job is never a candidate. Logs of the kept ones older than 7 days go.
    assert names(todo.records) == ["old"]
    assert names(todo.logs) == ["month", "week"]
    assert "beyond the 3 newest" in todo.records[0].why

    retention.apply(store, settings, todo, NOW)
    with store.read() as conn:
        state = {j: job_repo.job_by_id(conn, j) for j in
                 (fresh, week, month, old, modelled, running)}
        _, events = job_repo.list_events(conn, week, offset=0, limit=50, order="asc")
    assert state[old].deleted_at == NOW  # the scheduler purges it, with its folder
    assert all(state[j].deleted_at is None for j in (fresh, week, month, modelled, running))
    assert events[-1].message.startswith("Logs removed by retention: ended over 7 days ago")
    gone = {j: runs.RunPaths(settings.runs_dir, j).job_dir.exists()
            for j in (fresh, week, month, modelled)}
    assert gone == {fresh: True, week: False, month: False, modelled: True}
    with store.read() as conn:  # done: nothing more to do now
        again = retention.plan(conn, settings, NOW)
    assert again == retention.Plan()


def test_a_project_has_its_own_retention_and_none_by_default(
        store: db.Store, catalog: catalog_mod.Catalog, project: str,  # noqa: F811
        tmp_path: pathlib.Path) -> None:
    with store.begin() as conn:
        conn.execute(schema.projects.insert().values(id="scratch-id", name="scratch",
                                                     created_at=NOW))
    ended(store, catalog, project, "mine", 400)
    ended(store, catalog, "scratch-id", "theirs", 3)
    default = conftest.make_settings(tmp_path / "home")
    own = conftest.make_settings(tmp_path / "home",
                                 project_retention={"scratch": {"records_days": 2}})
    with store.read() as conn:
        assert retention.plan(conn, default, NOW) == retention.Plan()
        assert names(retention.plan(conn, own, NOW).records) == ["theirs"]
        assert retention.plan(conn, own, NOW, project) == retention.Plan()


def test_gc_shows_then_applies_and_the_scheduler_purges(tmp_path: pathlib.Path) -> None:
    live = conftest.start_live(tmp_path / "home", retention={"records_days": 1})
    try:
        job_id = live.submit(factories.make_job(command="true"))["metadata"]["id"]
        live.wait(job_id)
        store = live.embedded.platform.store
        factories.wait_for(lambda: _finalized(store, job_id), what="finishing")
        with store.begin() as conn:  # it ended two days ago
            conn.execute(schema.jobs.update().where(schema.jobs.c.id == job_id)
                         .values(end_time=int(time.time() * 1000) - 2 * DAY))
        runner = testing.CliRunner()
        obj = state.State(live.settings)
        dry = runner.invoke(main.cli, ["--url", live.url, "gc", "--dry-run"], obj=obj)
        assert dry.exit_code == 0, dry.output
        assert "records would remove: 1" in dry.output and job_id in dry.output
        assert live.http.get(live.path(f"/training-jobs/{job_id}")).status_code == 200
        done = runner.invoke(main.cli, ["--url", live.url, "gc"],
                             obj=state.State(live.settings))
        assert done.exit_code == 0 and "records removed: 1" in done.output
        factories.wait_for(
            lambda: live.http.get(live.path(f"/training-jobs/{job_id}")).status_code == 404,
            what="the scheduler to purge it")
    finally:
        conftest.stop_live(live)


def _finalized(store: db.Store, job_id: str) -> bool:
    with store.read() as conn:
        job = job_repo.job_by_id(conn, job_id)
    return job is not None and job.finalized_at is not None
