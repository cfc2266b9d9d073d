"""Repairing pipelines, on SQLite and PostgreSQL: rerun in its three forms with outputs
reused across attempts, caching, and clean and delete removing what they say."""

from __future__ import annotations

import json
import pathlib
import shutil
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from corral.domain import errors
from corral.kinds.pipelines import actions
from corral.store import job_repo, kind_tables
from tests import pipelines as pl


@pytest.fixture
def h(tmp_path: pathlib.Path, db_url: str) -> Iterator[pl.Harness]:
    harness = pl.start(tmp_path / "home", db_url)
    yield harness
    harness.stop()


@pytest.fixture
def code(tmp_path: pathlib.Path) -> pathlib.Path:
    return pl.step_code(tmp_path)


def _rerun(h: pl.Harness, pid: str, how: str, from_task: str | None = None,
           **params: str) -> None:
    with h.store.begin() as conn:
        actions.rerun(conn, h.project_id, pid, mode=actions.Rerun(how), from_task=from_task,
                      parameters=params, now=h.now())


def _ran(notes: pathlib.Path) -> list[str]:
    return [line.split()[0] for line in notes.read_text().splitlines()]


def test_rerun_in_its_three_forms(h: pl.Harness, code: pathlib.Path,
                                  tmp_path: pathlib.Path) -> None:
    notes, fixed = tmp_path / "notes", tmp_path / "fixed"
    pid = h.create(pl.pipeline(
        "repair",
        pl.task("a", code, note=str(notes), outputs=("out_a",)),
        pl.task("b", code, deps=("a",), note=str(notes), fail_unless=str(fixed),
                inputs={"in_a": "a.outputs.out_a"}, outputs=("out_b",),
                mode={"param": "mode"}),
        pl.task("c", code, deps=("b",), note=str(notes), inputs={"in_b": "b.outputs.out_b"},
                outputs=("out_c",)),
        parameters={"mode": "first"}))
    assert h.run(pid).state == "failed"
    assert h.states(pid) == {"a": "success", "b": "failed", "c": "upstream_failed"}
    first_a = h.runs(pid)["a"]

    fixed.touch()
    _rerun(h, pid, "from_failed")
    assert h.attempt(pid).progress == 33  # a's run is kept: one of three has ended
    assert h.run(pid).state == "success"
    runs = h.runs(pid)
    assert runs["a"].origin == "reused" and runs["a"].job_id == first_a.job_id
    assert h.value(runs["c"], "out_c") == "a;b;c;"  # attempt 1's a fed attempt 2's b
    assert json.loads(runs["b"].inputs or "{}")["in_a"] == json.loads(
        first_a.outputs or "{}")["out_a"]
    assert _ran(notes) == ["a", "b", "b", "c"]

    _rerun(h, pid, "from_task", "b", **{"b.extra": "1"})
    assert h.run(pid).state == "success"
    assert _ran(notes)[4:] == ["b", "c"]
    assert json.loads(h.runs(pid)["b"].parameters or "{}")["extra"] == "1"

    _rerun(h, pid, "all", mode="second")
    assert h.run(pid).state == "success"
    assert _ran(notes)[6:] == ["a", "b", "c"]
    assert json.loads(h.runs(pid)["b"].parameters or "{}")["mode"] == "second"
    assert [a.number for a in _attempts(h, pid)] == [1, 2, 3, 4]
    # Each attempt's runs wrote folders of their own.
    outs = {json.loads(h.runs(pid, n)["b"].outputs or "{}")["out_b"] for n in (1, 2, 3, 4)}
    assert len(outs) == 4


def _deleted(h: pl.Harness, job_id: str) -> bool:
    """The job is deleted (and ended), or already purged."""
    with h.store.read() as conn:
        job = job_repo.job_by_id(conn, job_id)
    return job is None or job.deleted_at is not None


def _attempts(h: pl.Harness, pid: str) -> list[Any]:
    with h.store.read() as conn:
        return list(conn.execute(sa.select(kind_tables.pipeline_attempts).where(
            kind_tables.pipeline_attempts.c.pipeline_id == pid)))


def test_a_rerun_is_refused_while_the_pipeline_runs_and_for_unknown_names(
        h: pl.Harness, code: pathlib.Path, tmp_path: pathlib.Path) -> None:
    pid = h.create(pl.pipeline("busy", pl.task("a", code, gate=str(tmp_path / "g"))))
    with pytest.raises(errors.InvalidState), h.store.begin() as conn:
        actions.rerun(conn, h.project_id, pid, mode=actions.Rerun.ALL, from_task=None,
                      parameters={}, now=h.now())
    (tmp_path / "g").touch()
    h.run(pid)
    for how, task, params, said in [
            ("from_task", "nope", {}, "not a task"), ("from_failed", None, {"nope": "1"},
                                                      "no parameter 'nope'"),
            ("all", None, {"nope.x": "1"}, "'nope' is not a task"),
            ("from_task", None, {}, "give a task")]:
        with pytest.raises(errors.BadParameter, match=said):
            _rerun(h, pid, how, task, **params)


def test_caching_reuses_an_identical_runs_outputs(h: pl.Harness, code: pathlib.Path,
                                                  tmp_path: pathlib.Path) -> None:
    notes = tmp_path / "notes"

    def body(name: str) -> dict[str, Any]:
        return pl.pipeline(
            name, pl.task("t", code, note=str(notes), outputs=("out_t",), metrics="acc:0.7",
                          cache={"max_age": "1h"}),
            pl.task("u", code, deps=("t",), inputs={"in_t": "t.outputs.out_t"},
                    outputs=("out_u",), when="t.acc > 0.5"))

    first = h.create(body("first"))
    assert h.run(first).state == "success"
    (code / "__pycache__").mkdir()  # what a code snapshot leaves out changes nothing
    (code / "__pycache__" / "step.cpython-311.pyc").write_bytes(b"\0")
    second = h.create(body("second"))
    assert h.run(second).state == "success"

    t1, t2 = h.runs(first)["t"], h.runs(second)["t"]
    assert (t2.state, t2.origin, t2.job_id) == ("cached", "cached", t1.job_id)
    assert t2.outputs == t1.outputs and json.loads(t2.metrics or "{}") == {"acc": 0.7}
    assert h.value(h.runs(second)["u"], "out_u") == "t;u;"
    assert _ran(notes) == ["t"]  # ran once
    assert set(h.owned(second)) == {"a1/u"}  # no job for t

    (code / "helper.py").write_text("# the code changed\n")
    third = h.create(body("third"))
    assert h.run(third).state == "success"
    assert h.runs(third)["t"].origin == "run"

    h.skew_ms = 2 * 3600 * 1000  # two hours on: past max_age
    fourth = h.create(body("fourth"))
    assert h.run(fourth).state == "success"
    assert h.runs(fourth)["t"].origin == "run"
    assert _ran(notes) == ["t", "t", "t"]


def test_a_one_task_pipeline_run_twice_is_cached_the_second_time(
        h: pl.Harness, code: pathlib.Path, tmp_path: pathlib.Path) -> None:
    notes = tmp_path / "notes"

    def body(name: str) -> dict[str, Any]:
        return pl.pipeline(name, pl.task("t", code, note=str(notes), outputs=("out_t",),
                                         metrics="acc:0.7", cache={"max_age": "1h"}))

    first = h.create(body("first"))
    assert h.run(first).state == "success"
    # Its last task's metrics are read before the attempt ends: the run can be cached.
    assert json.loads(h.runs(first)["t"].metrics or "null") == {"acc": 0.7}
    second = h.create(body("second"))
    assert h.run(second).state == "success"
    t1, t2 = h.runs(first)["t"], h.runs(second)["t"]
    assert (t2.state, t2.origin, t2.job_id) == ("cached", "cached", t1.job_id)
    assert _ran(notes) == ["t"]


def test_clean_removes_intermediate_outputs_and_keeps_the_model(
        h: pl.Harness, code: pathlib.Path, tmp_path: pathlib.Path) -> None:
    pid = h.create(pl.pipeline(
        "tidy", pl.task("prep", code, outputs=("out_data", "out_stats")),
        pl.task("train", code, deps=("prep",), inputs={"in_d": "prep.outputs.out_data"},
                outputs=("out_model", "out_logs")),
        model={"task": "train", "channel": "out_model", "name": "tidy-model"}))
    assert h.run(pid).state == "success"
    runs = h.runs(pid)
    model_dir = h.outputs(runs["train"])["out_model"]
    stats = pathlib.Path(h.outputs(runs["prep"])["out_stats"])
    # A job left a link where one of its output folders was: never followed.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "precious").write_text("keep me")
    shutil.rmtree(stats)
    stats.symlink_to(elsewhere)

    done = actions.clean(h.store, h.platform.settings, h.project_id, pid, h.owner, h.now())

    assert sorted(done.removed) == sorted([h.outputs(runs["prep"])["out_data"],
                                           h.outputs(runs["train"])["out_logs"]])
    assert (model_dir, "the saved model") in done.kept
    assert any(path == str(stats) and "link" in why for path, why in done.kept)
    assert (elsewhere / "precious").read_text() == "keep me"
    assert pathlib.Path(model_dir, "value.txt").exists()
    assert not pathlib.Path(done.removed[0]).exists()
    assert any(e.startswith("Cleaned: 2 output folder(s) removed") for e in h.events(pid))
    # A rerun runs again what lost its outputs, and then has them again.
    _rerun(h, pid, "from_failed")
    assert h.run(pid).state == "success"
    assert h.runs(pid)["prep"].origin == "run"


def test_delete_removes_the_pipeline_its_jobs_and_its_outputs(
        h: pl.Harness, code: pathlib.Path, tmp_path: pathlib.Path) -> None:
    ended = h.create(pl.pipeline("done", pl.task("a", code, outputs=("out_a",))))
    assert h.run(ended).state == "success"
    out = pathlib.Path(h.outputs(h.runs(ended)["a"])["out_a"])
    job_id = h.runs(ended)["a"].job_id or ""

    done = actions.delete(h.store, h.platform.settings, h.project_id, ended, h.owner, h.now())

    assert done is not None and done.removed == [str(out)] and not out.exists()
    assert _deleted(h, job_id)
    assert pl.count(h, kind_tables.pipeline_runs) == 0 and pl.count(h, kind_tables.pipelines) == 0

    running = h.create(pl.pipeline("busy", pl.task("a", code, gate=str(tmp_path / "never"),
                                                   outputs=("out_a",))))
    h.run(running, until=lambda: h.job(h.runs(running)["a"].job_id or "").phase == "Running")
    out = pathlib.Path(h.outputs(h.runs(running)["a"])["out_a"])
    job_id = h.runs(running)["a"].job_id or ""
    assert actions.delete(h.store, h.platform.settings, h.project_id, running, h.owner,
                          h.now()) is None  # deferred: stopped first

    h.drive(lambda: pl.count(h, kind_tables.pipelines) == 0)
    assert not out.exists()
    assert _deleted(h, job_id)
    # The name is free again.
    assert h.create(pl.pipeline("busy", pl.task("a", code)))


def test_a_pipeline_is_deleted_only_once_its_jobs_last_files_are_in(
        h: pl.Harness, code: pathlib.Path, tmp_path: pathlib.Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The storage component finishes with an ended job after it ended (its last upload,
    # its metrics): removing the outputs before left what it wrote next behind. Here it
    # is held back until the deletion has been asked.
    from corral.store import version_repo

    unfinished_ended = version_repo.unfinished_ended
    monkeypatch.setattr(version_repo, "unfinished_ended", lambda conn, limit=50: [])
    pid = h.create(pl.pipeline("late", pl.task("a", code, fail_unless=str(tmp_path / "no"),
                                                outputs=("out_a",))))
    assert h.run(pid).state == "failed"
    job_id = h.runs(pid)["a"].job_id or ""

    assert actions.delete(h.store, h.platform.settings, h.project_id, pid, h.owner,
                          h.now()) is None
    h.step()
    assert pl.count(h, kind_tables.pipelines) == 1, "deleted before its job was done with"

    monkeypatch.setattr(version_repo, "unfinished_ended", unfinished_ended)
    h.drive(lambda: pl.count(h, kind_tables.pipelines) == 0)
    assert _deleted(h, job_id)
