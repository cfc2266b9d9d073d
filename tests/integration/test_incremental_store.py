"""The store of incremental learning on SQLite and PostgreSQL: migration 0008, datasets and
their counts, a model alias's history."""

from __future__ import annotations

import pathlib
import threading
import time

import pytest
import sqlalchemy as sa

from corral.domain import errors
from corral.store import dataset_repo, db, model_repo
from tests.integration import incremental_harness as h


def test_migration_0008_keeps_existing_rows_and_goes_back_down(db_url: str) -> None:
    from tests.integration.test_store_scheduling import _migrated_from

    with _migrated_from(db_url, "0007", "Completed", "Completed") as engine:
        with engine.connect() as conn:
            tables = set(sa.inspect(conn).get_table_names())
            assert {"datasets", "il_loops", "il_rounds", "il_deploys",
                    "model_alias_history"} <= tables
            assert conn.execute(sa.text("SELECT count(*) FROM jobs")).scalar_one() == 1
        db.downgrade(engine, "0007")
        with engine.connect() as conn:
            assert "il_loops" not in set(sa.inspect(conn).get_table_names())
            assert conn.execute(sa.text("SELECT count(*) FROM jobs")).scalar_one() == 1
        db.upgrade(engine)


@pytest.fixture
def w(store: db.Store, tmp_path: pathlib.Path) -> h.Harness:
    return h.make(store, tmp_path)


def test_a_datasets_count_follows_appends_and_changes_made_by_hand(w: h.Harness) -> None:
    w.dataset("stream", ["a", "b"])
    assert w.append("stream", ["c", "d", "e"]) == 5
    path = w.root / "stream.txt"
    assert path.read_text().split() == ["a", "b", "c", "d", "e"]
    with path.open("a") as fh:  # appended by someone else: counted again from the file
        fh.write("f\n\ng\n")
    assert w.append("stream", ["h"]) == 8
    with w.store.read() as conn:
        ds = dataset_repo.get(conn, w.project_id, "stream")
    assert ds.number_of_samples == 8 and ds.format == "txt"


def test_a_csv_datasets_header_is_no_sample(w: h.Harness) -> None:
    path = w.root / "rows.csv"
    path.write_text("x,y\n1,2\n")
    from corral.services import datasets

    with w.store.begin() as conn:
        datasets.create(conn, project_id=w.project_id, user_name="ann", name="rows",
                        url=str(path), fmt=None, description="", stores=w.stores,
                        confine=w.confine, now=w.now)
    assert w.append("rows", ["3,4", "5,6"]) == 3


def test_a_sample_is_one_non_empty_line(w: h.Harness) -> None:
    w.dataset("stream")
    for bad in (["two\nlines"], [""], ["  "]):
        assert "samples[0]" in h.expect_error(w.append, "stream", bad).message


def test_a_dataset_outside_the_projects_storage_or_behind_a_link_is_refused(
        w: h.Harness, tmp_path: pathlib.Path) -> None:
    from corral.services import datasets

    inside_home = w.settings.home / "secret.txt"
    inside_home.parent.mkdir(parents=True, exist_ok=True)
    with w.store.begin() as conn:
        err = h.expect_error(datasets.create, conn, project_id=w.project_id, user_name="ann",
                             name="x", url=str(inside_home), fmt=None, description="",
                             stores=w.stores, confine=w.confine, now=w.now)
    assert "outside the storage this project may use" in err.message
    w.dataset("stream", ["a"])
    target = tmp_path / "elsewhere.txt"
    target.write_text("secret\n")
    (w.root / "stream.txt").unlink()
    (w.root / "stream.txt").symlink_to(target)  # planted after the dataset was made
    err = h.expect_error(w.append, "stream", ["b"])
    assert "a link was put in its way" in err.message
    assert target.read_text() == "secret\n"


def test_an_alias_remembers_every_move_and_what_it_named_at_any_time(w: h.Harness) -> None:
    v1 = w.model("m")
    v2 = w.model("m")
    with w.store.begin() as conn:
        m = model_repo.get(conn, w.project_id, "m")
        assert model_repo.move_alias(conn, m.id, "production", v1, now=1000, user_name="ann",
                                     reason="first") is None
        assert model_repo.move_alias(conn, m.id, "production", v2, now=2000, user_name="bob",
                                     reason="better") == v1
        model_repo.delete_version(conn, m.id, v2, now=3000, user_name="cid")
    with w.store.read() as conn:
        moves = model_repo.alias_history(conn, m.id, "production")
        at = [model_repo.alias_at(conn, m.id, "production", t) for t in (999, 1500, 2500, 3500)]
    assert [(x.from_version, x.to_version, x.user_name, x.reason) for x in moves] == [
        (None, v1, "ann", "first"), (v1, v2, "bob", "better"),
        (v2, None, "cid", f"version {v2} deleted")]
    assert at == [None, v1, v2, None]


def test_a_dataset_in_use_cannot_be_deleted(w: h.Harness) -> None:
    w.model("m")
    w.dataset("stream")
    w.create(h.spec(w.root))
    with w.store.begin() as conn:
        ds = dataset_repo.get(conn, w.project_id, "stream")
        with pytest.raises(errors.InvalidState):
            dataset_repo.delete(conn, ds.id)


class Killed(BaseException):
    """The server killed at that point (nothing after it runs)."""


def test_a_server_killed_between_an_appends_file_and_its_count_loses_no_sample(
        w: h.Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    """The samples are written to the file first and counted in a transaction after; a
    server killed between the two leaves the count behind the file, and the next look at
    the dataset counts the file again."""
    from corral.services import datasets

    w.dataset("stream", ["a"])

    def killed(*_a: object, **_k: object) -> None:
        raise Killed

    with monkeypatch.context() as m:
        m.setattr(dataset_repo, "set_count", killed)
        with pytest.raises(Killed):
            w.append("stream", ["b", "c"])
    assert (w.root / "stream.txt").read_text().split() == ["a", "b", "c"]
    with w.store.read() as conn:
        ds = dataset_repo.get(conn, w.project_id, "stream")
    snap = datasets.changed(ds, w.stores, w.confine)
    assert snap is not None
    with w.store.begin() as conn:
        assert datasets.count_if_changed(conn, ds, snap, w.now) == 3
    assert w.append("stream", ["d"]) == 4


def test_a_slow_append_on_postgresql_answers_its_samples_once(
        pg_url: str, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """PostgreSQL ends a write transaction that waits for its server longer than the
    server's `dead_after`: an append whose file took longer than that, written inside the
    transaction, was ended after its samples had landed, answered an error, and a client
    sending it again added them twice. The file is written outside any write transaction:
    the slow append answers its samples, in the file once, counted."""
    from corral.storage import indexfiles

    store = db.Store(pg_url, dead_after=1.0)
    store.migrate()
    try:
        w = h.make(store, tmp_path)
        w.dataset("stream", ["a"])
        written = indexfiles.append

        def slow(*args: object) -> None:
            written(*args)  # type: ignore[arg-type]
            time.sleep(2.5)  # object storage far away: longer than dead_after

        monkeypatch.setattr(indexfiles, "append", slow)
        assert w.append("stream", ["b"]) == 2
        assert (w.root / "stream.txt").read_text().split() == ["a", "b"]
        with store.read() as conn:
            assert dataset_repo.get(conn, w.project_id, "stream").number_of_samples == 2
    finally:
        store.dispose()


def test_appends_to_one_dataset_take_turns_and_a_late_one_is_refused(
        store: db.Store) -> None:
    """Appends take turns without holding the dataset's row (on PostgreSQL an advisory
    lock of a transaction that locks no row): one that waited too long is refused."""
    refused: list[errors.CorralError] = []

    def late() -> None:
        try:
            with store.turn("dataset x", 0.2):
                pass
        except errors.InvalidState as exc:
            refused.append(exc)

    with store.turn("dataset x", 1.0):
        other = threading.Thread(target=late)
        other.start()
        other.join(30)
        with store.turn("dataset y", 1.0):  # another key is free
            pass
    assert len(refused) == 1 and "busy" in refused[0].message
    with store.turn("dataset x", 0.2):  # free again once the first is done
        pass
