"""A pipeline's task states, its status derived from them, its progress, and the trigger
rules that decide when a waiting task runs. Which state may follow which is the two
tables here (a run's, an attempt's), drawn in docs/pipelines.md.

The pipeline's status is one pure function of its tasks' states, with FATE Flow's
precedence: while a task runs or may still start the pipeline runs; once none can, a
failure outranks a timeout, which outranks a cancellation; all ended well is success.
docs/pipelines.md has it as a table, and the tests check the table.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence

from corral.domain import machines


class TaskState(enum.StrEnum):
    WAITING = "waiting"  #: not started yet: its upstream tasks have not all ended
    RUNNING = "running"  #: its training job is submitted (queued or running)
    SUCCESS = "success"  #: its job completed
    FAILED = "failed"  #: its job failed, or it could not be started
    CANCELED = "canceled"  #: stopped, or never started because the pipeline was stopped
    TIMEOUT = "timeout"  #: stopped because the pipeline ran past its timeout
    SKIPPED = "skipped"  #: its `when` was false, or its rule could not be met
    UPSTREAM_FAILED = "upstream_failed"  #: an upstream task it needs did not succeed
    CACHED = "cached"  #: an earlier identical run's outputs were reused


class Status(enum.StrEnum):
    RUNNING = "running"  #: a task runs or may still start
    SUCCESS = "success"  #: every task ended well (success, cached or skipped)
    FAILED = "failed"  #: a task failed (or an upstream failure stopped one)
    TIMEOUT = "timeout"  #: the pipeline ran past its timeout (and nothing failed)
    CANCELED = "canceled"  #: the pipeline was stopped (and nothing failed or timed out)


_T = TaskState
#: a run's state -> the states it may move to. A rerun's runs that keep their outputs are
#: made in the state their run ended in, and never move.
RUN_TRANSITIONS: dict[TaskState, frozenset[TaskState]] = {
    _T.WAITING: frozenset({_T.RUNNING, _T.CACHED, _T.FAILED, _T.CANCELED, _T.SKIPPED,
                           _T.UPSTREAM_FAILED}),
    _T.RUNNING: frozenset({_T.SUCCESS, _T.FAILED, _T.TIMEOUT, _T.CANCELED}),
    **{s: frozenset() for s in (_T.SUCCESS, _T.FAILED, _T.CANCELED, _T.TIMEOUT, _T.SKIPPED,
                                _T.UPSTREAM_FAILED, _T.CACHED)},
}
#: the state a new run is made in
RUN_START = TaskState.WAITING
ENDED = machines.ended(RUN_TRANSITIONS)
#: ended and its outputs may be used
GOOD = frozenset({TaskState.SUCCESS, TaskState.CACHED})
#: ended without doing its work, for a reason its downstream tasks must hear of
FAILED_LIKE = frozenset({TaskState.FAILED, TaskState.TIMEOUT, TaskState.CANCELED,
                         TaskState.UPSTREAM_FAILED})
#: an attempt's state (its status) -> the states it may move to: it runs, then ends once
ATTEMPT_TRANSITIONS: dict[Status, frozenset[Status]] = {
    Status.RUNNING: frozenset({Status.SUCCESS, Status.FAILED, Status.TIMEOUT,
                               Status.CANCELED}),
    **{s: frozenset() for s in (Status.SUCCESS, Status.FAILED, Status.TIMEOUT,
                                Status.CANCELED)},
}
#: the state a new attempt is made in
ATTEMPT_START = Status.RUNNING
ENDED_STATUSES = machines.ended(ATTEMPT_TRANSITIONS)


def status(states: Iterable[TaskState]) -> Status:
    """The pipeline's status from its tasks' states (those of its current attempt)."""
    seen = set(states)
    if seen - ENDED:
        return Status.RUNNING
    for state, result in ((TaskState.FAILED, Status.FAILED),
                          (TaskState.TIMEOUT, Status.TIMEOUT),
                          (TaskState.CANCELED, Status.CANCELED),
                          (TaskState.UPSTREAM_FAILED, Status.FAILED)):
        if state in seen:
            return result
    return Status.SUCCESS


def progress(states: Sequence[TaskState]) -> int:
    """The share of tasks that have ended, in percent (100 only when all have)."""
    if not states:
        return 100
    return sum(s in ENDED for s in states) * 100 // len(states)


# --- trigger rules ------------------------------------------------------------------------


class Rule(enum.StrEnum):
    ALL_SUCCESS = "all_success"  #: every upstream task succeeded (the default)
    ALL_DONE = "all_done"  #: every upstream task ended, however
    ONE_FAILED = "one_failed"  #: an upstream task failed (runs without waiting for the rest)
    NONE_FAILED = "none_failed"  #: every upstream task ended, none failed (skipped is fine)
    ALWAYS = "always"  #: at once, without waiting for the upstream tasks


class Verdict(enum.StrEnum):
    WAIT = "wait"
    RUN = "run"
    SKIP = "skip"
    UPSTREAM_FAILED = "upstream_failed"


def decide(rule: Rule, upstream: Sequence[TaskState]) -> Verdict:
    """What a waiting task with `rule` does, given its upstream tasks' states (every item
    of a task that fans out counts)."""
    if rule == Rule.ALWAYS:
        return Verdict.RUN
    failed = any(s in FAILED_LIKE for s in upstream)
    if rule == Rule.ONE_FAILED:
        if failed:
            return Verdict.RUN
        return Verdict.SKIP if all(s in ENDED for s in upstream) else Verdict.WAIT
    if not all(s in ENDED for s in upstream):
        return Verdict.WAIT
    if rule == Rule.ALL_DONE:
        return Verdict.RUN
    if failed:
        return Verdict.UPSTREAM_FAILED
    if rule == Rule.NONE_FAILED:
        return Verdict.RUN
    return Verdict.SKIP if any(s == TaskState.SKIPPED for s in upstream) else Verdict.RUN
