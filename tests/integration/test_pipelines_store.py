"""Pipelines in the store, on SQLite and PostgreSQL: the migration, names, the cache."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

from corral.store import db, pipeline_repo
from tests.integration.test_store import NOW, project  # noqa: F401


def _pipeline(pid: str, project_id: str, name: str = "p", **extra: Any) -> dict[str, Any]:
    return {"id": pid, "project_id": project_id, "name": name, "description": "",
            "user_name": "u", "spec": "{}", "output_base": "/o", "attempt": 1,
            "created_at": NOW, "updated_at": NOW, **extra}


def _run(pid: str, project_id: str, key: str, **extra: Any) -> dict[str, Any]:
    values = {"pipeline_id": pid, "attempt": 1, "key": key, "project_id": project_id,
              "task": key, "item": None, "state": "success", "origin": "run",
              "cache_key": "k", "metrics": "{}", "ended_at": NOW, "updated_at": NOW,
              "outputs_removed_at": None}
    return {**values, **extra}


def test_a_live_pipeline_name_is_taken_once_per_project(store: db.Store,
                                                        project: str) -> None:  # noqa: F811
    with store.begin() as conn:
        pipeline_repo.insert(conn, _pipeline("a", project, "same"))
        with pytest.raises(pipeline_repo.DuplicatePipeline):
            pipeline_repo.insert(conn, _pipeline("b", project, "same"))
    with store.begin() as conn:
        pipeline_repo.mark_deleted(conn, "a", NOW)
        pipeline_repo.insert(conn, _pipeline("b", project, "same"))  # free once deleted


def test_the_cache_gives_only_a_run_that_succeeded_by_itself_recently_with_outputs(
        store: db.Store, project: str) -> None:  # noqa: F811
    with store.begin() as conn:
        pipeline_repo.insert(conn, _pipeline("a", project))
        pipeline_repo.insert_runs(conn, [
            _run("a", project, "old", ended_at=NOW - 10_000),
            _run("a", project, "failed", state="failed", ended_at=NOW + 5),
            _run("a", project, "copy", origin="reused", ended_at=NOW + 4),
            _run("a", project, "unread", metrics=None, ended_at=NOW + 3),
            _run("a", project, "cleaned", outputs_removed_at=NOW, ended_at=NOW + 2),
            _run("a", project, "good", ended_at=NOW + 1),
            _run("a", project, "other", cache_key="k2", ended_at=NOW + 6)])
    with store.read() as conn:
        hit = pipeline_repo.cached_run(conn, project, "k", NOW - 5_000)
        assert hit is not None and hit.key == "good"
        assert pipeline_repo.cached_run(conn, "another-project", "k", 0) is None


def test_migration_0009_adds_the_pipeline_tables_and_goes_back_down(db_url: str) -> None:
    from tests.integration.test_store_scheduling import _migrated_from

    with _migrated_from(db_url, "0008", "Completed", "Completed") as engine:
        tables = set(sa.inspect(engine).get_table_names())
        assert {"pipelines", "pipeline_attempts", "pipeline_runs"} <= tables
        db.downgrade(engine, "0008")
        tables = set(sa.inspect(engine).get_table_names())
        assert not {"pipelines", "pipeline_attempts", "pipeline_runs"} & tables
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT count(*) FROM jobs")).scalar_one() == 1
        db.upgrade(engine)
