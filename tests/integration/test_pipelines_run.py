"""Pipelines running real jobs, on SQLite and PostgreSQL: data between tasks, the trigger
rules, `when`, fan-out and its cap, the model, progress, stop and timeout.

The scheduler runs each task's job as a real process; the test drives the pipelines'
controller itself (`tests/pipelines.py`), on a clock it may move ahead.
"""

from __future__ import annotations

import json
import pathlib
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from corral.kinds.pipelines import actions
from corral.store import kind_tables, model_repo, schema
from tests import pipelines as pl


@pytest.fixture
def h(tmp_path: pathlib.Path, db_url: str) -> Iterator[pl.Harness]:
    harness = pl.start(tmp_path / "home", db_url)
    yield harness
    harness.stop()


@pytest.fixture
def code(tmp_path: pathlib.Path) -> pathlib.Path:
    return pl.step_code(tmp_path)


def test_data_flows_by_reference_and_the_model_is_saved(h: pl.Harness,
                                                        code: pathlib.Path) -> None:
    pid = h.create(pl.pipeline(
        "flow",
        pl.task("prep", code, outputs=("out_data",), metrics="rows:42"),
        pl.task("train", code, deps=("prep",), inputs={"in_data": "prep.outputs.out_data"},
                outputs=("out_model",), rows={"metric": "prep.rows"},
                for_each=[{"tag": "t0"}, {"tag": "t1"}]),
        pl.task("check", code, deps=("train",), inputs={"in_m": "train.outputs.out_model"},
                outputs=("out_r",), for_each=[{"tag": "c0"}, {"tag": "c1"}]),
        model={"task": "train[1]", "channel": "out_model", "name": "flow-model"}))

    attempt = h.run(pid)

    assert attempt.state == "success", h.states(pid)
    runs = h.runs(pid)
    assert h.value(runs["check[1]"], "out_r") == "prep;t1;c1;"  # item 1 read item 1
    assert h.value(runs["check[0]"], "out_r") == "prep;t0;c0;"
    assert json.loads(runs["train[0]"].parameters or "{}")["rows"] == "42"
    assert json.loads(runs["train[0]"].inputs or "{}")["in_data"] == \
        json.loads(runs["prep"].outputs or "{}")["out_data"]
    with h.store.read() as conn:
        models = model_repo.list_models(conn, h.project_id)
        version = model_repo.resolve(conn, models[0], None, None)
        p = conn.execute(sa.select(kind_tables.pipelines)).one()
    # Only the pipeline's model: its tasks' jobs register none of their own.
    assert [m.name for m in models] == ["flow-model"]
    assert version.source_job_id == runs["train[1]"].job_id
    assert (p.model_name, p.model_version) == ("flow-model", 1)
    assert (pathlib.Path(version.location) / "value.txt").read_text() == "prep;t1;"
    assert "Model flow-model version 1 registered from train[1].outputs.out_model" in \
        h.events(pid)


def test_each_trigger_rule(h: pl.Harness, code: pathlib.Path, tmp_path: pathlib.Path) -> None:
    gate = tmp_path / "gate"
    both = ("ok", "bad")
    pid = h.create(pl.pipeline(
        "rules", pl.task("ok", code), pl.task("bad", code, gate=str(gate), exit=1),
        *(pl.task(f"r_{rule}", code, deps=both, trigger=rule)
          for rule in ("all_success", "all_done", "one_failed", "none_failed", "always"))))

    # `always` runs at once: it has ended while `bad` still waits at its gate.
    h.run(pid, until=lambda: h.states(pid)["r_always"] == "success")
    assert h.states(pid)["bad"] == "running"
    gate.touch()
    attempt = h.run(pid)

    assert h.states(pid) == {
        "ok": "success", "bad": "failed", "r_all_success": "upstream_failed",
        "r_all_done": "success", "r_one_failed": "success",
        "r_none_failed": "upstream_failed", "r_always": "success"}
    assert attempt.state == "failed"
    assert attempt.message is not None and attempt.message.startswith("bad failed")


def test_when_skips_and_a_skip_reaches_what_needs_success(h: pl.Harness,
                                                          code: pathlib.Path) -> None:
    pid = h.create(pl.pipeline(
        "conds", pl.task("a", code, metrics="acc:0.5,loss:0.25"),
        pl.task("good", code, deps=("a",), when="a.acc < 0.9 and params.mode == 'full'"),
        pl.task("great", code, deps=("a",), when="a.acc >= 0.9"),
        pl.task("after", code, deps=("great",)),
        pl.task("anyway", code, deps=("great",), trigger="none_failed"),
        pl.task("handler", code, deps=("great",), trigger="one_failed"),
        pl.task("typo", code, deps=("a",), when="a.accuracy > 0"),
        pl.task("report", code, **{"finally": True}), parameters={"mode": "full"}))

    attempt = h.run(pid)

    assert h.states(pid) == {
        "a": "success", "good": "success", "great": "skipped", "after": "skipped",
        "anyway": "success", "handler": "skipped", "typo": "failed", "report": "success"}
    runs = h.runs(pid)
    assert runs["great"].message == "when was false: a.acc >= 0.9"
    assert "reported no metric 'accuracy' (it reported: acc, loss)" in (runs["typo"].message
                                                                      or "")
    assert attempt.state == "failed"


def test_a_fan_out_runs_at_most_its_parallelism(h: pl.Harness, code: pathlib.Path) -> None:
    pid = h.create(pl.pipeline("fan", pl.task(
        "f", code, sleep=0.3, for_each=[{"tag": f"i{i}"} for i in range(5)], parallelism=2)))
    busiest = 0

    def watch() -> bool:
        nonlocal busiest
        states = h.states(pid)
        busiest = max(busiest, sum(s == "running" for s in states.values()))
        return all(s == "success" for s in states.values())

    h.run(pid, until=watch)

    assert busiest == 2
    jobs = [h.job(r.job_id or "") for r in h.runs(pid).values()]
    spans = [(j.start_time or 0, j.end_time or 0) for j in jobs]
    overlapping = max(sum(s <= t < e for s, e in spans) for t, _ in spans)
    assert overlapping <= 2
    assert h.run(pid).state == "success"  # (once its runs' final metrics are read)


def test_progress_never_goes_down_and_ends_at_100(h: pl.Harness, code: pathlib.Path) -> None:
    pid = h.create(pl.pipeline(
        "prog", pl.task("a", code), pl.task("b", code, deps=("a",), sleep=0.2),
        pl.task("c", code, deps=("b",)), pl.task("d", code, deps=("b",))))
    seen: list[int] = []

    def watch() -> bool:
        a = h.attempt(pid)
        seen.append(a.progress)
        return a.state != "running"

    h.run(pid, until=watch)

    assert seen == sorted(seen) and seen[-1] == 100
    assert {0, 25, 50} & set(seen)  # it was seen on its way


def test_stop_leaves_nothing_running(h: pl.Harness, code: pathlib.Path,
                                     tmp_path: pathlib.Path) -> None:
    pid = h.create(pl.pipeline("stopped", pl.task("long", code, gate=str(tmp_path / "never")),
                               pl.task("next", code, deps=("long",)),
                               pl.task("cleanup", code, **{"finally": True})))
    h.run(pid, until=lambda: h.job(h.runs(pid)["long"].job_id or "").phase == "Running")

    with h.store.begin() as conn:
        actions.stop(conn, h.project_id, pid, h.now())
    attempt = h.run(pid)

    assert attempt.state == "canceled"
    assert h.states(pid) == {"long": "canceled", "next": "canceled", "cleanup": "canceled"}
    job = h.job(h.runs(pid)["long"].job_id or "")
    assert job.phase == "Terminated"
    with h.store.read() as conn:
        live = conn.execute(sa.select(sa.func.count()).select_from(schema.tasks).where(
            schema.tasks.c.job_id == job.id,
            schema.tasks.c.state.in_(["launching", "running"]))).scalar_one()
    assert live == 0
    with pytest.raises(Exception, match="has ended"), h.store.begin() as conn:
        actions.stop(conn, h.project_id, pid, h.now())


def test_a_timeout_stops_the_pipeline_and_its_finally_tasks_run(
        h: pl.Harness, code: pathlib.Path, tmp_path: pathlib.Path) -> None:
    pid = h.create(pl.pipeline(
        "late", pl.task("long", code, gate=str(tmp_path / "never")),
        pl.task("next", code, deps=("long",)), pl.task("report", code, **{"finally": True}),
        timeout="1m"))
    h.run(pid, until=lambda: h.job(h.runs(pid)["long"].job_id or "").phase == "Running")
    h.step()
    assert h.attempt(pid).timed_out_at is None

    h.skew_ms = 61_000  # a minute later, by the controller's clock
    attempt = h.run(pid)

    assert attempt.state == "timeout"
    assert h.states(pid) == {"long": "timeout", "next": "canceled", "report": "success"}
    assert h.job(h.runs(pid)["long"].job_id or "").phase == "Terminated"
    assert any("ran past its timeout" in e for e in h.events(pid))


def test_a_task_whose_job_cannot_be_submitted_fails_and_says_why(
        h: pl.Harness, code: pathlib.Path) -> None:
    pid = h.create(pl.pipeline("gone", pl.task("a", code), pl.task("b", code, deps=("a",))))
    (code / "step.py").unlink()  # the code goes away after the pipeline was accepted
    code.rmdir()

    attempt = h.run(pid)

    assert h.states(pid) == {"a": "failed", "b": "upstream_failed"}
    assert "is not a directory" in (h.runs(pid)["a"].message or "")
    assert attempt.state == "failed"


def test_a_pipeline_whose_pass_fails_says_so_once_and_holds_no_other_back(
        h: pl.Harness, code: pathlib.Path) -> None:
    broken = h.create(pl.pipeline("broken", pl.task("a", code)))
    fine = h.create(pl.pipeline("fine", pl.task("a", code)))
    h.execute(kind_tables.pipelines.update().where(kind_tables.pipelines.c.id == broken)
              .values(spec="{}"))  # a spec no version of corral could read

    assert h.run(fine).state == "success"
    failed = [e for e in h.events(broken) if e.startswith("The controller's pass failed")]
    assert len(failed) == 1, failed  # said once, though every pass failed
    assert h.attempt(broken).state == "running"
