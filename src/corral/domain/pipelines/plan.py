"""One pass of a pipeline's attempt, decided: which runs end, which start, which wait.

`plan` reads the attempt as it is (each run's state, the phase of its job, the metrics it
reported) and answers the steps that move it on; it does no I/O, so a pass is a pure
function of what the store holds and the controller only carries the steps out. Runs are
visited in the graph's order and each step is seen by those after it, so a failure's
consequences (upstream_failed, skipped, down the whole graph) are decided in one pass.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from corral.domain import jobs
from corral.domain.pipelines import expr, shape, status

TaskState = status.TaskState


@dataclasses.dataclass(frozen=True)
class Run:
    """A run of the attempt as the plan sees it."""

    key: str
    task: str
    item: int | None
    state: TaskState
    #: the phase of its job while it runs; None when the job is gone
    job_phase: str | None = None
    #: why its job failed, if it did
    job_message: str = ""
    #: its final metrics, once read ({} for a run that ended without a job)
    metrics: Mapping[str, float] | None = None
    #: its outputs are all there: false until the last upload of an output in object
    #: storage is done (local ones are there as soon as the job has ended)
    outputs_ready: bool = True


@dataclasses.dataclass(frozen=True)
class Situation:
    shape: shape.Shape
    runs: Mapping[str, Run]
    params: Mapping[str, str]
    #: a user asked the pipeline to stop
    stopping: bool = False
    #: the pipeline ran past its timeout
    timed_out: bool = False


@dataclasses.dataclass(frozen=True)
class Step:
    """Run `key` moves to `to` (RUNNING: submit its job), saying why."""

    key: str
    to: TaskState
    message: str = ""


def plan(sit: Situation) -> list[Step]:
    """The steps that move the attempt on, in the order to carry them out."""
    states = {k: r.state for k, r in sit.runs.items()}
    steps: list[Step] = []

    def move(key: str, to: TaskState, message: str = "") -> None:
        states[key] = to
        steps.append(Step(key, to, message))

    for run in sit.runs.values():
        if run.state == TaskState.RUNNING:
            ended = _job_end(run, sit.timed_out)
            if ended is not None:
                move(run.key, *ended)
    if sit.stopping:
        for key in [k for k, s in states.items() if s == TaskState.WAITING]:
            move(key, TaskState.CANCELED, "the pipeline was stopped")
        return steps
    for key, task, item in sit.shape.runs():
        if states[key] != TaskState.WAITING:
            continue
        t = sit.shape.tasks[task]
        if sit.timed_out and not t.task.finally_:
            move(key, TaskState.CANCELED, "the pipeline ran past its timeout")
            continue
        verdict = _verdict(sit, states, t)
        if verdict == status.Verdict.SKIP:
            move(key, TaskState.SKIPPED, f"its rule {t.rule.value} cannot be met")
        elif verdict == status.Verdict.UPSTREAM_FAILED:
            move(key, TaskState.UPSTREAM_FAILED, "an upstream task did not succeed")
        elif verdict == status.Verdict.RUN:
            _start(sit, states, t, key, item, move)
    return steps


def _job_end(run: Run, timed_out: bool) -> tuple[TaskState, str] | None:
    """How a running run ended, from its job; None while the job runs."""
    if run.job_phase is None:
        return TaskState.FAILED, "its training job was deleted"
    phase = jobs.Phase(run.job_phase)
    if phase not in jobs.TERMINAL:
        return None
    if phase == jobs.Phase.COMPLETED:
        return TaskState.SUCCESS, ""
    if phase == jobs.Phase.TERMINATED:
        return ((TaskState.TIMEOUT, "stopped: the pipeline ran past its timeout") if timed_out
                else (TaskState.CANCELED, "its training job was stopped"))
    return TaskState.FAILED, run.job_message or f"its training job ended {phase.value}"


def _verdict(sit: Situation, states: Mapping[str, TaskState],
             t: shape.TaskShape) -> status.Verdict:
    if t.task.finally_:  # after every other task, however they ended
        others = [k for k, task, _ in sit.shape.runs()
                  if not sit.shape.tasks[task].task.finally_]
        if any(states[k] not in status.ENDED for k in others):
            return status.Verdict.WAIT
    upstream = [states[k] for k in sit.shape.upstream_keys(t.name)]
    return status.decide(t.rule, upstream)


def _start(sit: Situation, states: dict[str, TaskState], t: shape.TaskShape, key: str,
           item: int | None, move: Callable[..., None]) -> None:
    """Start run `key` if what it takes is there, its `when` holds and its task's
    parallelism allows; else say why it never will, or leave it waiting."""
    needed = [sit.shape.item_of(c.task, item, c.item) for c in t.inputs.values()]
    taken = {sit.shape.item_of(r.task, item, r.item): r.task
             for r in [*t.metrics.values(), *(t.when.refs if t.when else ())]
             if r.task != expr.PARAMS}
    for upstream in dict.fromkeys([*needed, *taken]):
        if states[upstream] not in status.ENDED:
            return  # (possible under one_failed and always)
        if upstream in taken and sit.runs[upstream].metrics is None:
            return  # its final metrics are not read yet
        if upstream in needed and not sit.runs[upstream].outputs_ready:
            return  # its outputs are still being uploaded
    for upstream in needed:
        if states[upstream] not in status.GOOD:
            move(key, TaskState.UPSTREAM_FAILED,
                 f"it takes outputs of {upstream}, which ended {states[upstream].value}")
            return
    if t.when is not None:
        try:
            holds = t.when.evaluate(lambda ref: _lookup(sit, item, ref))
        except expr.EvalError as exc:
            move(key, TaskState.FAILED, f"when: {exc.message}")
            return
        if not holds:
            move(key, TaskState.SKIPPED, f"when was false: {t.when.text}")
            return
    cap = t.task.parallelism
    if cap is not None:
        busy = sum(states[k] == TaskState.RUNNING for k in sit.shape.keys_of(t.name))
        if busy >= cap:
            return
    move(key, TaskState.RUNNING)


def _lookup(sit: Situation, item: int | None, ref: expr.Ref) -> Any:
    if ref.task == expr.PARAMS:
        return expr.parameter_value(sit.params[ref.name])
    key = sit.shape.item_of(ref.task, item, ref.item)
    return metric(sit.runs[key], ref.name)


def metric(run: Run, name: str) -> float:
    """A run's final metric, or EvalError saying what it has instead."""
    found = run.metrics or {}
    if name not in found:
        have = ", ".join(sorted(found)) or "none"
        raise expr.EvalError(f"{run.key} ({run.state.value}) reported no metric '{name}' "
                             f"(it reported: {have})")
    return float(found[name])
