"""Dataset versions in the store and the services on SQLite and PostgreSQL: migration 0016,
versions frozen and numbered, found by id, name or number and only in their dataset, a job
pinned to one and given a checked copy, a dataset kept while a job not ended reads it, and
a job stopped while its inputs are fetched ending as any stopped job."""

from __future__ import annotations

import json
import pathlib
import uuid
from typing import Any

import pytest
import sqlalchemy as sa

from corral.domain import errors, identity, jobs, specs
from corral.services import dataset_versions, staging, submit
from corral.storage import objects
from corral.store import dataset_repo, db, job_repo, kind_rows, schema
from tests import factories
from tests.integration import incremental_harness as h


def test_migration_0016_adds_versions_and_an_empty_lineage_and_goes_back_down(
        db_url: str) -> None:
    from tests.integration.test_store_scheduling import _old_job

    engine = db.make_engine(db_url)
    try:
        db.upgrade(engine, "0015")
        with engine.begin() as conn:
            _old_job(conn, "Completed", "Completed")
            conn.execute(sa.text("INSERT INTO models (id, project_id, name, next_version, "
                                 "created_at, updated_at) VALUES ('m', 'p', 'm', 2, 0, 0)"))
            conn.execute(sa.text(
                "INSERT INTO model_versions (model_id, version, created_at, location, "
                "size_bytes, file_count, source_job_id, source_job_name, source_channel, "
                "source_phase, metrics, parameters, inputs) VALUES ('m', 1, 0, '/x', 1, 1, "
                "'j', 'old', 'train_url', 'Completed', '{}', '{}', '{}')"))
        db.upgrade(engine)
        with engine.connect() as conn:
            assert "dataset_versions" in set(sa.inspect(conn).get_table_names())
            assert conn.execute(sa.text("SELECT datasets FROM model_versions")).scalar_one() \
                == "[]"
        db.downgrade(engine, "0015")
        with engine.connect() as conn:
            assert "dataset_versions" not in set(sa.inspect(conn).get_table_names())
            assert conn.execute(sa.text("SELECT count(*) FROM model_versions")).scalar_one() == 1
        db.upgrade(engine)
    finally:
        engine.dispose()


def test_migration_0018_keeps_versions_and_marks_none_deleted_and_goes_back_down(
        db_url: str) -> None:
    engine = db.make_engine(db_url)
    try:
        db.upgrade(engine, "0017")
        with engine.begin() as conn:
            conn.execute(sa.text("INSERT INTO projects (id, name, created_at) "
                                 "VALUES ('p', 'p', 0)"))
            conn.execute(sa.text(
                "INSERT INTO datasets (id, project_id, name, description, url, format, "
                "user_name, number_of_samples, created_at, updated_at) VALUES ('d', 'p', "
                "'d', '', '/d.txt', 'txt', 'ann', 1, 0, 0)"))
            conn.execute(sa.text(
                "INSERT INTO dataset_versions (id, dataset_id, project_id, number, "
                "description, location, format, number_of_samples, size_bytes, "
                "content_hash, files, user_name, created_at) VALUES ('v', 'd', 'p', 1, '', "
                "'/v', 'txt', 1, 2, 'sha256:x', '[]', 'ann', 0)"))
        db.upgrade(engine)
        with engine.connect() as conn:
            assert conn.execute(sa.text(
                "SELECT number, deleted_at FROM dataset_versions")).one() == (1, None)
        db.downgrade(engine, "0017")
        with engine.connect() as conn:
            assert "deleted_at" not in {c["name"] for c in sa.inspect(conn).get_columns(
                "dataset_versions")}
            assert conn.execute(sa.text("SELECT count(*) FROM dataset_versions")).scalar_one() == 1
        db.upgrade(engine)
    finally:
        engine.dispose()


@pytest.fixture
def w(store: db.Store, tmp_path: pathlib.Path) -> h.Harness:
    return h.make(store, tmp_path)


def freeze(w: h.Harness, ref: str = "stream", description: str = "") -> kind_rows.DatasetVersion:
    return dataset_versions.create(
        w.store, w.stores, w.settings.home, project_id=w.project_id, ref=ref,
        description=description, user_name="ann", confine=w.confine,
        now=lambda: w.now).version


def reading(w: h.Harness, dataset: str, version: str, **kw: Any) -> str:
    """A job of the project reading `version` of `dataset` as input `data`."""
    body = specs.JobCreate.model_validate(factories.make_job(command="true", **kw) | {
        "algorithm": {"command": "true", "inputs": [{"name": "data", "remote": {
            "dataset": {"id": dataset, "version_id": version}}}]}})
    with w.store.begin() as conn:
        return submit.create_job(conn, w.catalog(), body, project_id=w.project_id, now=w.now,
                                 places=submit.Places(runs_dir=w.settings.runs_dir,
                                                      stores=w.stores))


def test_versions_are_numbered_and_found_only_in_their_dataset(w: h.Harness) -> None:
    w.dataset("stream", ["a", "b"])
    w.dataset("other", ["z"])
    first = freeze(w, description="two")
    w.append("stream", ["c"])
    second = freeze(w)
    theirs = freeze(w, "other")
    assert (first.number, second.number, theirs.number) == (1, 2, 1)
    assert (first.number_of_samples, second.number_of_samples) == (2, 3)
    assert json.loads(first.files)[0]["sha256"] != json.loads(second.files)[0]["sha256"]
    assert (pathlib.Path(first.location) / "samples.txt").read_text() == "a\nb\n"
    with w.store.read() as conn:
        stream = dataset_repo.get(conn, w.project_id, "stream")
        for ref in (first.id, "V0001", "v1", "1", "0001"):
            assert dataset_repo.get_version(conn, stream, ref).id == first.id
        assert [v.number for v in dataset_repo.versions_of(conn, stream.id)] == [1, 2]
        for ref in (theirs.id, "V0003", "latest"):
            with pytest.raises(dataset_repo.VersionNotFound):
                dataset_repo.get_version(conn, stream, ref)


def test_the_same_samples_have_the_same_content_hash(w: h.Harness) -> None:
    w.dataset("stream", ["a", "b"])
    w.dataset("twin", ["a", "", "b"])  # a blank line is no sample
    first = freeze(w)
    assert first.content_hash == freeze(w, "twin").content_hash
    w.append("stream", ["c"])
    assert freeze(w).content_hash != first.content_hash


def test_a_job_is_pinned_to_a_version_and_gets_a_checked_copy(w: h.Harness) -> None:
    w.dataset("stream", ["a", "b"])
    v1 = freeze(w)
    job_id = reading(w, "stream", "V0001")
    spec = job_repo.job_spec(w.job_row(job_id))
    ref = spec.algorithm.inputs[0].dataset
    assert ref is not None
    assert (ref.id, ref.version_id, ref.obs_url, ref.version_name) == (
        v1.dataset_id, v1.id, v1.location, "V0001")
    assert w.job_row(job_id).staging == submit.STAGING_PENDING
    local = pathlib.Path(spec.algorithm.inputs[0].local_dir or "")
    assert local == w.settings.runs_dir / job_id / "inputs" / "data"

    got = dataset_versions.fetch(w.store, w.stores, w.project_id, ref, objects.local(local))
    assert got.id == v1.id
    assert (local / "samples.txt").read_text() == "a\nb\n"
    assert json.loads((local / "manifest.json").read_text())["content_hash"] == v1.content_hash

    (pathlib.Path(v1.location) / "samples.txt").write_text("a\nX\n")  # same size
    with pytest.raises(dataset_versions.Changed, match="was changed since"):
        dataset_versions.fetch(w.store, w.stores, w.project_id, ref,
                               objects.local(local.with_name("again")))


def test_a_copy_a_killed_server_left_half_made_is_made_anew(w: h.Harness) -> None:
    w.dataset("stream", ["a", "b"])
    freeze(w)
    job_id = reading(w, "stream", "V0001")
    local = pathlib.Path(job_repo.job_spec(w.job_row(job_id)).algorithm.inputs[0].local_dir
                         or "")
    local.mkdir(parents=True)
    (local / ".samples.txt.tmp-99999").write_text("a\n")  # the file it was writing
    staging.Fetcher(w.store, w.stores, w.settings, lambda: w.now, w.job_row(job_id)).run()
    assert sorted(p.name for p in local.iterdir()) == ["manifest.json", "samples.txt"]
    assert (local / "samples.txt").read_text() == "a\nb\n"


def test_bad_references_are_refused_with_nothing_made(w: h.Harness) -> None:
    w.dataset("stream", ["a"])
    freeze(w)
    for dataset, version, words in (("nope", "V0001", "dataset 'nope' does not exist"),
                                    ("stream", "V0002", "has no version 'V0002'")):
        with pytest.raises(errors.BadParameter, match=words):
            reading(w, dataset, version, name="refused")
    with w.store.read() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(schema.jobs)).scalar() == 0


def test_a_dataset_is_kept_while_a_job_not_ended_reads_it(w: h.Harness) -> None:
    w.dataset("stream", ["a"])
    v1 = freeze(w)
    job_id = reading(w, "stream", "V0001", name="reader")
    with w.store.begin() as conn, pytest.raises(errors.InvalidState, match="reader"):
        dataset_repo.delete(conn, v1.dataset_id)
    w.end(job_id, "Completed")
    with w.store.begin() as conn:
        assert dataset_repo.delete(conn, v1.dataset_id) == [v1.location]
        assert dataset_repo.version_by_id(conn, v1.id) is None


def test_a_dataset_is_kept_until_a_job_that_read_it_is_finished(w: h.Harness) -> None:
    # The model a job is registered as, after it ends, records the content hash and samples
    # of the versions it read: deleted between the end and the registration, they were lost.
    w.dataset("stream", ["a"])
    v1 = freeze(w)
    job_id = reading(w, "stream", "V0001", name="ended")
    w.end(job_id, "Completed", finalized=False)
    with w.store.begin() as conn, pytest.raises(errors.InvalidState, match="ended"):
        dataset_repo.delete(conn, v1.dataset_id)
    with w.store.begin() as conn:
        job_repo.set_finalized(conn, [job_id], w.now)
    with w.store.begin() as conn:
        assert dataset_repo.delete(conn, v1.dataset_id) == [v1.location]


def test_a_deleted_dataset_leaves_no_folder_of_its_versions(w: h.Harness) -> None:
    w.dataset("stream", ["a"])
    v1 = freeze(w)
    root = pathlib.Path(v1.location).parent
    (root / "f00d" / ".samples.txt.tmp-99999").parent.mkdir()  # a make a kill cut short
    (root / "f00d" / ".samples.txt.tmp-99999").write_text("a\n")
    admin = identity.Principal(user_id="u", user_name="root", is_admin=True, roles={})
    dataset_versions.delete(w.store, w.stores, w.settings.home, w.project_id, "stream", admin)
    assert not root.exists()
    assert (w.root / "stream.txt").exists()  # its index file stays


def test_a_job_stopped_while_its_inputs_are_fetched_is_settled(w: h.Harness) -> None:
    w.dataset("stream", ["a"])
    freeze(w)
    job_id = reading(w, "stream", "V0001")
    with w.store.read() as conn:
        assert job_id not in {j.id for j, _t in job_repo.active_with_tasks(conn)}  # not queued
    with w.store.begin() as conn:
        job_repo.request_terminate(conn, job_id, w.now, "Termination requested")
    with w.store.read() as conn:
        found = {j.id: j for j, _t in job_repo.active_with_tasks(conn)}
    assert found[job_id].phase == jobs.Phase.TERMINATING.value


def test_no_version_is_made_of_an_index_file_that_is_gone(w: h.Harness) -> None:
    w.dataset("stream", ["a"])
    (w.root / "stream.txt").unlink()
    with pytest.raises(errors.BadParameter, match="does not exist"):
        freeze(w)
    with w.store.read() as conn:
        assert dataset_repo.versions_of(conn, dataset_repo.get(conn, w.project_id,
                                                               "stream").id) == []
    assert not (w.settings.home / "datasets").exists() or not any(
        (w.settings.home / "datasets").rglob("samples.txt"))


def test_a_version_a_killed_server_left_half_made_goes_when_the_next_is_made(
        w: h.Harness) -> None:
    # A version's files are written before its row: a server killed in between left a
    # folder no version has.
    w.dataset("stream", ["a"])
    v1 = freeze(w)
    root = pathlib.Path(v1.location).parent
    half = root / str(uuid.uuid4())
    half.mkdir()
    (half / ".samples.txt.tmp-99999").write_text("a\n")
    (root / "notes").mkdir()  # not a version's: left alone
    (root / "notes" / "readme.txt").write_text("mine")
    w.append("stream", ["b"])

    v2 = freeze(w)

    assert not half.exists()
    assert sorted(p.name for p in root.iterdir()) == sorted([v1.id, v2.id, "notes"])
    assert (pathlib.Path(v1.location) / "samples.txt").read_text() == "a\n"
