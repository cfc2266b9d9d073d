"""Versions, reported metrics and the model registry in the store, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from corral.domain import errors, specs, versions
from corral.domain import jobs as J
from corral.services import collect, finishing, submit
from corral.storage import runs
from corral.store import db, job_repo, kind_tables, model_repo, schema, version_repo
from tests import conftest, factories
from tests.integration.test_store import NOW, catalog, create, project  # noqa: F401


def test_the_migrated_schema_is_the_one_the_code_declares(store: db.Store) -> None:
    with store.engine.connect() as conn:
        assert kind_tables.metadata is schema.metadata  # the kinds' tables compared too
        assert compare_metadata(MigrationContext.configure(conn), schema.metadata) == []


def test_upgrading_keeps_old_jobs_and_registers_none_of_them(db_url: str) -> None:
    engine = db.make_engine(db_url)
    try:
        db.upgrade(engine, "0001")
        with engine.begin() as conn:
            conn.execute(schema.projects.insert().values(id="p", name="default", created_at=1))
            for job_id, phase in (("done", "Completed"), ("busy", "Running")):
                conn.exec_driver_sql(
                    "INSERT INTO jobs (id, seq, project_id, name, description, kind, user_name,"
                    " phase, secondary_phase, spec, flavor_id, node_count, cpu, memory_mb, gpu,"
                    f" retry_limit, create_time, updated_at) VALUES ('{job_id}', "
                    f"{1 if job_id == 'done' else 2}, 'p', '{job_id}', '', 'job', '', '{phase}',"
                    f" '{phase}', '{{}}', 'f', 1, 1, 1, 0, 0, 1, 5)")
            conn.exec_driver_sql("INSERT INTO attempts (job_id, seq, start_at, start_type) "
                                 "VALUES ('done', 1, 1, 'x')")
        db.upgrade(engine)
        with engine.begin() as conn:
            rows = {r.id: r for r in conn.execute(sa.select(schema.jobs))}
            assert rows["done"].finalized_at == 5 and rows["busy"].finalized_at is None
            assert rows["done"].version is None
            assert conn.execute(sa.select(sa.func.count()).select_from(schema.attempts)
                                ).scalar_one() == 1
        db.downgrade(engine, "0001")  # and back down, and up again
        db.upgrade(engine)
    finally:
        engine.dispose()


def test_versions_share_a_name_that_first_versions_keep_unique(
        store: db.Store, catalog: Any, project: str) -> None:  # noqa: F811
    first = create(store, catalog, project, name="fam")
    with store.begin() as conn:
        job = job_repo.job_by_id(conn, first)
        me = version_repo.ensure_version(conn, job)
        assert (me.family_id, me.number) == (first, 1)
        assert version_repo.take_number(conn, first) == 2
    with store.begin() as conn:
        body = specs.JobCreate.model_validate(factories.make_job(name="fam", command="true"))
        second = submit.create_job(conn, catalog, body, project_id=project, now=NOW,
                                   version=submit.NewVersion(
                                       family_id=first, number=2, parent=me, resume=False,
                                       output_bases={}))
    with store.read() as conn:
        listed = version_repo.family_versions(conn, first)
    assert [(v.number, j.id) for v, j in listed] == [(1, first), (2, second)]
    with pytest.raises(errors.DuplicateName):
        create(store, catalog, project, name="fam")
    # A number taken in a transaction that rolled back is taken again; a committed one never.
    with pytest.raises(RuntimeError), store.begin() as conn:
        version_repo.take_number(conn, first)
        raise RuntimeError
    with store.begin() as conn:
        job_repo.mark_deleted(conn, second, NOW)
        job_repo.purge_job(conn, second)
    with store.begin() as conn:
        assert version_repo.take_number(conn, first) == 3


def test_reported_metrics_are_stored_once_however_often_they_are_read(
        store: db.Store, catalog: Any, project: str, tmp_path: pathlib.Path) -> None:  # noqa: F811
    job_id = create(store, catalog, project)
    with store.begin() as conn:
        job_repo.open_attempt(conn, job_id, 1, NOW, J.StartType.INIT_OR_RESCHEDULED)
        job_repo.insert_tasks(conn, [factories.make_task(job_id)])
    paths = runs.RunPaths(tmp_path / "runs", job_id)
    log = paths.log_path(1, "worker-0")
    log.parent.mkdir(parents=True)
    log.write_text("hello\ncorral:metrics step=1 loss=3\ncorral:metrics step=2 lo")
    file = paths.metrics_path(1, "worker-0")
    file.parent.mkdir(parents=True)
    file.write_text(json.dumps({"step": 1, "acc": 0.5}) + "\n")

    def read() -> list[tuple[Any, ...]]:
        collect.collect_job(store, tmp_path / "runs", job_id, lambda: NOW)
        with store.read() as conn:
            return [(p.name, p.step, p.value) for p in version_repo.points_of(conn, job_id)]

    assert sorted(read()) == [("acc", 1, 0.5), ("loss", 1, 3.0)]
    assert sorted(read()) == [("acc", 1, 0.5), ("loss", 1, 3.0)]  # nothing twice
    with log.open("a") as fh:  # the half line is finished
        fh.write("ss=2\n")
    assert sorted(read()) == [("acc", 1, 0.5), ("loss", 1, 3.0), ("loss", 2, 2.0)]
    with store.read() as conn:
        assert version_repo.final_of(conn, job_id) == {"acc": 0.5, "loss": 2.0}


def test_ended_jobs_finished_together_each_get_their_own_final_metrics(
        store: db.Store, catalog: Any, project: str, tmp_path: pathlib.Path) -> None:  # noqa: F811
    settings = conftest.make_settings(tmp_path / "home")
    runs_dir = settings.runs_dir
    jobs = [create(store, catalog, project, name=n) for n in ("a", "b", "quiet", "gone")]
    for job_id, lines in zip(jobs, (["loss=3", "loss=1 acc=0.9"], ["loss=7"], [], []),
                             strict=True):
        with store.begin() as conn:
            job_repo.open_attempt(conn, job_id, 1, NOW, J.StartType.INIT_OR_RESCHEDULED)
            job_repo.insert_tasks(conn, [factories.make_task(job_id, state="exited")])
            conn.execute(schema.jobs.update().where(schema.jobs.c.id == job_id)
                         .values(phase="Completed"))
        log = runs.RunPaths(runs_dir, job_id).log_path(1, "worker-0")
        log.parent.mkdir(parents=True)
        log.write_text("".join(f"corral:metrics step={i} {m}\n" for i, m in enumerate(lines)))
    with store.begin() as conn:
        job_repo.mark_deleted(conn, jobs[3], NOW)
        rows = [job_repo.job_by_id(conn, j) for j in jobs]

    finishing.finish_plain(store, settings, rows, lambda: NOW + 1)

    with store.read() as conn:
        finals = {j: json.loads(version_repo.version_of(conn, j).final_metrics or "null")
                  for j in jobs}
        assert {j: job_repo.job_by_id(conn, j).finalized_at for j in jobs} == dict.fromkeys(
            jobs, NOW + 1)
    assert finals[jobs[0]] == {"acc": 0.9, "loss": 1.0}
    assert finals[jobs[1]] == {"loss": 7.0}
    assert finals[jobs[2]] == {}
    assert finals[jobs[3]] is None  # deleted: only marked finished


def test_model_versions_and_aliases(store: db.Store, project: str) -> None:  # noqa: F811
    with store.begin() as conn:
        model = model_repo.ensure(conn, project, "m", NOW)
        for n, job in ((1, "j1"), (2, "j2")):
            assert model_repo.take_number(conn, model.id, NOW) == n
            model_repo.add_version(conn, {
                "model_id": model.id, "version": n, "created_at": NOW, "location": f"/m/{n}",
                "size_bytes": 1, "file_count": 1, "source_job_id": job, "source_job_name": "t",
                "source_channel": "train_url", "source_phase": "Completed",
                "metrics": {"loss": 0.1}})
        model_repo.set_alias(conn, model.id, "production", 1, NOW)
        model_repo.set_alias(conn, model.id, "production", 2, NOW)
    with store.begin() as conn:
        assert model_repo.resolve(conn, model, alias="production").version == 2
        assert model_repo.resolve(conn, model).version == 2
        model_repo.delete_version(conn, model.id, 2, now=NOW)
        assert model_repo.aliases(conn, model.id) == {}
        assert model_repo.take_number(conn, model.id, NOW) == 3
        with pytest.raises(errors.NotFound):
            model_repo.resolve(conn, model, 2)
        assert model_repo.registered_from(conn, "j1").model_name == "m"
    assert versions.name(3) == "V0003"
