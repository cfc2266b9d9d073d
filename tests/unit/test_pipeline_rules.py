"""A pipeline's status, progress and trigger rules as tables, and one pass's plan."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

from corral.domain.pipelines import build, plan, shape, status

S = status.TaskState
ROOT = pathlib.Path(__file__).resolve().parents[2]

#: (the tasks' states, the pipeline's status)
STATUS_TABLE = [
    ("success, running", "running"),
    ("failed, waiting", "running"),
    ("waiting", "running"),
    ("success, cached, skipped", "success"),
    ("failed, timeout, canceled, success", "failed"),
    ("timeout, canceled, success", "timeout"),
    ("canceled, skipped, success", "canceled"),
    ("upstream_failed, skipped", "failed"),
    ("timeout, upstream_failed", "timeout"),
    ("skipped", "success"),
]


def _states(text: str) -> list[status.TaskState]:
    return [S(s.strip().strip("`")) for s in text.split(",")]


@pytest.mark.parametrize(("states", "expected"), STATUS_TABLE)
def test_the_status_of_a_pipeline_follows_fates_precedence(states: str, expected: str) -> None:
    assert status.status(_states(states)) == expected


def _docs_table() -> list[tuple[str, str]]:
    text = (ROOT / "docs" / "pipelines.md").read_text()
    block = text.split("<!-- the status table: tests/unit/test_pipeline_rules.py -->")[1]
    found = []
    for line in block.strip().splitlines()[2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        found.append((cells[0], cells[1].strip("`")))
    return found


def test_the_status_table_of_the_docs_is_the_status_function() -> None:
    table = _docs_table()
    assert len(table) >= 8
    for states, expected in table:
        assert status.status(_states(states)) == expected, (states, expected)


@pytest.mark.parametrize(("states", "expected"), [
    ([], 100), ([S.WAITING] * 3, 0), ([S.SUCCESS, S.RUNNING, S.WAITING], 33),
    ([S.SKIPPED, S.FAILED, S.UPSTREAM_FAILED, S.RUNNING], 75), ([S.CACHED, S.CANCELED], 100),
])
def test_progress_is_the_share_of_runs_that_have_ended(states: list[status.TaskState],
                                                       expected: int) -> None:
    assert status.progress(states) == expected


R, V = status.Rule, status.Verdict
#: (rule, upstream states, verdict)
RULES = [
    (R.ALL_SUCCESS, "success, cached", V.RUN),
    (R.ALL_SUCCESS, "success, running", V.WAIT),
    (R.ALL_SUCCESS, "success, failed", V.UPSTREAM_FAILED),
    (R.ALL_SUCCESS, "success, canceled", V.UPSTREAM_FAILED),
    (R.ALL_SUCCESS, "success, skipped", V.SKIP),
    (R.ALL_SUCCESS, "skipped, timeout", V.UPSTREAM_FAILED),
    (R.ALL_DONE, "failed, skipped, running", V.WAIT),
    (R.ALL_DONE, "failed, skipped, upstream_failed", V.RUN),
    (R.ONE_FAILED, "failed, running", V.RUN),
    (R.ONE_FAILED, "success, running", V.WAIT),
    (R.ONE_FAILED, "success, skipped", V.SKIP),
    (R.ONE_FAILED, "upstream_failed, success", V.RUN),
    (R.NONE_FAILED, "success, skipped", V.RUN),
    (R.NONE_FAILED, "success, running", V.WAIT),
    (R.NONE_FAILED, "success, timeout", V.UPSTREAM_FAILED),
    (R.ALWAYS, "running, waiting", V.RUN),
    (R.ALL_SUCCESS, "", V.RUN),
]


@pytest.mark.parametrize(("rule", "upstream", "verdict"), RULES)
def test_trigger_rules(rule: status.Rule, upstream: str, verdict: status.Verdict) -> None:
    states = _states(upstream) if upstream else []
    assert status.decide(rule, states) == verdict


# --- plan -----------------------------------------------------------------------------------


def _task(name: str, deps: tuple[str, ...] = (), **extra: Any) -> dict[str, Any]:
    return {"name": name, "depends_on": list(deps), "algorithm": {"command": "true"}, **extra}


def _shape(*tasks: dict[str, Any], **extra: Any) -> shape.Shape:
    return build.parse({"metadata": {"name": "p"}, "tasks": list(tasks), **extra})


def _plan(sh: shape.Shape, states: dict[str, Any] | None = None, *,
          phases: dict[str, str | None] | None = None,
          metrics: dict[str, dict[str, float]] | None = None, **flags: Any) -> dict[str, str]:
    """{key: new state} of the steps of one pass (running runs' jobs in `phases`)."""
    states = states or {}
    runs = {}
    for key, task, item in sh.runs():
        state = S(states.get(key, "waiting"))
        phase = (phases or {}).get(key, "Running")
        runs[key] = plan.Run(key=key, task=task, item=item, state=state, job_phase=phase,
                             metrics=(metrics or {}).get(key, {} if state in status.ENDED
                                                          else None))
    steps = plan.plan(plan.Situation(shape=sh, runs=runs, params=sh.body.parameters, **flags))
    return {s.key: s.to.value for s in steps}


def test_a_chain_starts_its_first_task_and_waits_for_the_rest() -> None:
    sh = _shape(_task("a"), _task("b", ("a",)), _task("c", ("b",)))
    assert _plan(sh) == {"a": "running"}
    assert _plan(sh, {"a": "running"}) == {}
    assert _plan(sh, {"a": "running"}, phases={"a": "Completed"}) == {"a": "success",
                                                                        "b": "running"}


def test_a_failure_reaches_the_whole_graph_below_it_in_one_pass() -> None:
    sh = _shape(_task("a"), _task("b", ("a",)), _task("c", ("b",)),
                _task("d", ("b",), trigger="all_done"), _task("e", ("a",), trigger="one_failed"))
    steps = _plan(sh, {"a": "running"}, phases={"a": "Failed"})
    assert steps == {"a": "failed", "b": "upstream_failed", "c": "upstream_failed",
                     "d": "running", "e": "running"}


def test_a_job_stopped_by_a_timeout_times_its_run_out() -> None:
    sh = _shape(_task("a"), _task("b", ("a",)), _task("z", ("a",), **{"finally": True}))
    steps = _plan(sh, {"a": "running"}, phases={"a": "Terminated"}, timed_out=True)
    assert steps == {"a": "timeout", "b": "canceled", "z": "running"}


def test_a_stop_cancels_every_waiting_run_finally_ones_too() -> None:
    sh = _shape(_task("a"), _task("b", ("a",)), _task("z", **{"finally": True}))
    assert _plan(sh, {"a": "running"}, stopping=True) == {"b": "canceled", "z": "canceled"}


def test_a_finally_task_waits_for_every_other_task() -> None:
    sh = _shape(_task("a"), _task("b"), _task("z", **{"finally": True}))
    assert _plan(sh, {"a": "failed", "b": "running"}) == {}
    assert _plan(sh, {"a": "failed", "b": "success"}) == {"z": "running"}


def test_always_runs_at_once_unless_it_takes_data_from_its_upstream() -> None:
    sh = _shape(_task("a", algorithm={"command": "true", "outputs": [{"name": "o"}]}),
                _task("b", ("a",), trigger="always"),
                _task("c", ("a",), trigger="always", algorithm={
                    "command": "true", "inputs": [{"name": "i", "from": "a.outputs.o"}]}))
    assert _plan(sh, {"a": "running"}) == {"b": "running"}


def test_an_input_from_an_upstream_that_did_not_succeed_fails_its_task() -> None:
    sh = _shape(_task("a", algorithm={"command": "true", "outputs": [{"name": "o"}]}),
                _task("c", ("a",), trigger="all_done", algorithm={
                    "command": "true", "inputs": [{"name": "i", "from": "a.outputs.o"}]}))
    assert _plan(sh, {"a": "failed"}) == {"c": "upstream_failed"}


def test_when_is_read_once_the_metrics_it_names_are_there() -> None:
    sh = _shape(_task("a"), _task("b", ("a",), when="a.acc >= 0.9 and params.go == 'yes'"),
                parameters={"go": "yes"})
    assert _plan(sh, {"a": "success"}, metrics={"a": None}) == {}  # type: ignore[dict-item]
    assert _plan(sh, {"a": "success"}, metrics={"a": {"acc": 0.95}}) == {"b": "running"}
    assert _plan(sh, {"a": "success"}, metrics={"a": {"acc": 0.5}}) == {"b": "skipped"}
    assert _plan(sh, {"a": "success"}, metrics={"a": {"loss": 0.5}}) == {"b": "failed"}


def test_a_skipped_task_skips_what_needs_it_to_succeed() -> None:
    sh = _shape(_task("a"), _task("b", ("a",), when="a.acc > 1"), _task("c", ("b",)),
                _task("d", ("b",), trigger="none_failed"))
    assert _plan(sh, {"a": "success"}, metrics={"a": {"acc": 0.5}}) == {
        "b": "skipped", "c": "skipped", "d": "running"}


def test_a_fan_out_starts_at_most_its_parallelism() -> None:
    sh = _shape(_task("f", for_each=[{"x": i} for i in range(4)], parallelism=2))
    assert _plan(sh) == {"f[0]": "running", "f[1]": "running"}
    assert _plan(sh, {"f[0]": "running", "f[1]": "success"}) == {"f[2]": "running"}
    assert _plan(sh, {"f[0]": "running", "f[1]": "running"}) == {}


def test_a_run_whose_job_is_gone_fails() -> None:
    sh = _shape(_task("a"))
    assert _plan(sh, {"a": "running"}, phases={"a": None}) == {"a": "failed"}


def test_the_status_table_is_in_the_docs_for_every_status() -> None:
    told = {expected for _, expected in _docs_table()}
    assert told == {s.value for s in status.Status}


def test_outputs_in_object_storage_are_taken_once_uploaded() -> None:
    sh = _shape(_task("a", algorithm={"command": "true", "outputs": [{"name": "o"}]}),
                _task("b", ("a",), algorithm={
                    "command": "true", "inputs": [{"name": "i", "from": "a.outputs.o"}]}))
    runs = {key: plan.Run(key=key, task=task, item=item,
                          state=S.SUCCESS if key == "a" else S.WAITING,
                          metrics=None, outputs_ready=False)
            for key, task, item in sh.runs()}
    sit = plan.Situation(shape=sh, runs=runs, params={})
    assert plan.plan(sit) == []
    runs["a"] = plan.Run(key="a", task="a", item=None, state=S.SUCCESS, metrics={})
    assert [(s.key, s.to) for s in plan.plan(sit)] == [("b", S.RUNNING)]
