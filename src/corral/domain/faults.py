"""What follows a failed attempt: restart in place, queue again elsewhere, or fail.

The policy is data and pure functions, so that the reconciler only gathers what happened
(the task that failed, the tail of its log, the job's earlier attempts) and carries out
the decision:

- `classify`: what kind of failure a task's end was (`jobs.FailureClass`: a fact about the
  failure, from how the task ended and what its log says, whichever rule then decides),
  and which rule of the job's (or of the defaults) it matched;
- `decide`: what follows, from the rules' action, the job's annotations, the retry count
  and the per-class budgets spent by earlier attempts, and the backoff before a restart;
- `silence`: whether a running job's tasks have been silent (no log, no CPU or GPU) long
  enough to count as hung.

Budgets are counted from the attempts' records (each closed attempt keeps its class and
how it was recovered), never from a counter of their own: a server killed at any moment
counts the same again. docs/fault-tolerance.md is the user's page for all of this.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping, Sequence

from corral.domain import faultspec, jobs

#: a sample below both counts as no use: a process blocked on I/O or a lock still wakes up
#: now and then (percent of one core; percent of its GPUs)
IDLE_CPU_PERCENT = 1.0
IDLE_GPU_PERCENT = 1.0
#: how much of a failed task's log the rules' patterns are matched on
LOG_TAIL_LINES = 200
LOG_TAIL_BYTES = 64 * 1024
#: the hang timeout of a job that sets none, unless the server sets another (seconds)
DEFAULT_HANG_TIMEOUT = 1800


@dataclasses.dataclass(frozen=True)
class Matcher:
    """A rule as the policy applies it: the job's (from the spec) or a default one."""

    action: faultspec.Action
    exit_codes: frozenset[int] = frozenset()
    log_contains: str = ""
    default: bool = False

    def matches(self, exit_code: int | None, lines: Sequence[str]) -> bool:
        if self.exit_codes and exit_code not in self.exit_codes:
            return False
        return not self.log_contains or any(self.log_contains in line for line in lines)

    def describe(self) -> str:
        parts = []
        if self.exit_codes:
            parts.append("exit code " + " or ".join(str(c) for c in sorted(self.exit_codes)))
        if self.log_contains:
            parts.append(f"log contains {self.log_contains!r}")
        return ("default rule " if self.default else "rule ") + " and ".join(parts)


#: what a line of a failed task's log says its failure was, whatever rule decides what
#: follows (a job's own rule for the line changes the action, never the class)
LOG_CLASSES: tuple[tuple[str, jobs.FailureClass], ...] = (
    ("CUDA out of memory", jobs.FailureClass.OUT_OF_MEMORY),
)

#: the rules every job has, after its own (a job's rule for the same failure wins)
DEFAULT_RULES: tuple[Matcher, ...] = (
    # Restarted unchanged, it runs out again: a smaller batch or a bigger GPU is needed.
    Matcher(faultspec.Action.NO_RETRY, log_contains="CUDA out of memory", default=True),
)


@dataclasses.dataclass(frozen=True)
class Policy:
    """A job's fault tolerance: its annotations and its `spec.fault_tolerance` together."""

    retry_limit: int = 0
    unconditional: bool = False
    hang_retry: bool = False
    rules: tuple[Matcher, ...] = DEFAULT_RULES
    budgets: Mapping[jobs.FailureClass, int] = dataclasses.field(default_factory=dict)
    backoff: faultspec.Backoff = dataclasses.field(default_factory=faultspec.Backoff)
    hang_timeout: int = DEFAULT_HANG_TIMEOUT  #: seconds; 0: hangs are not looked for
    max_run_time: int | None = None  #: seconds from the job's start; None: no limit
    limit_name: str = "max_run_time"  #: the field it comes from (or auto_stop)

    @classmethod
    def of(cls, annotations: Mapping[str, str], ft: faultspec.FaultTolerance | None,
           hang_timeout: int = DEFAULT_HANG_TIMEOUT,
           max_run_time: int | None = None, limit_name: str = "max_run_time") -> Policy:
        """`hang_timeout`: the server's, for a job that sets none; `max_run_time`: the
        job's limit where it is not ft's alone (spec.auto_stop, specs.Spec.max_run_time),
        and `limit_name` the field it comes from."""
        ft = ft or faultspec.FaultTolerance()
        own = tuple(Matcher(r.action, frozenset(r.exit_codes or ()), r.log_contains or "")
                    for r in ft.rules)
        return cls(
            retry_limit=int(annotations.get(jobs.RETRY_ANNOTATION, "0")),
            unconditional=flag(annotations.get(jobs.UNCONDITIONAL_ANNOTATION)),
            hang_retry=flag(annotations.get(jobs.HANG_RETRY_ANNOTATION)),
            rules=own + DEFAULT_RULES,
            budgets={jobs.FailureClass(k): n for k, n in ft.budgets.items()},
            backoff=ft.backoff or faultspec.Backoff(),
            hang_timeout=hang_timeout if ft.hang_timeout is None else ft.hang_timeout,
            max_run_time=ft.max_run_time if max_run_time is None else max_run_time,
            limit_name=limit_name)


def flag(value: str | None) -> bool:
    """An annotation that is a switch ("true"/"false", any case; absent is false)."""
    return (value or "").strip().lower() == "true"


# --- what a failure was ---------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Failure:
    """The task whose end failed an attempt, and how."""

    klass: jobs.FailureClass
    task: str  #: worker-0, ...
    reason: str  #: "exit with 1", "failed to start: ...", "hanged"
    node: str = ""
    #: the node caused it (a launch on a node that has left): the job's retries are spared
    infra: bool = False
    rule: Matcher | None = None  #: the rule it matched, if any

    @property
    def action(self) -> faultspec.Action:
        return self.rule.action if self.rule else faultspec.Action.RETRY


def classify(policy: Policy, *, task: str, node: str, state: jobs.TaskState,
             exit_code: int | None, message: str, out_of_memory: bool,
             log_tail: str = "", node_gone: bool = False) -> Failure:
    """What a failed task's end was. `message`: the task's (why it was lost or could not
    start; the memory limit it went over); `log_tail`: the end of its log, for the rules;
    `node_gone`: its node is no longer in the cluster."""
    if state is jobs.TaskState.LOST:
        return Failure(jobs.FailureClass.LOST, task, "lost", node)
    if state is jobs.TaskState.NODE_LOST:
        return Failure(jobs.FailureClass.NODE_LOST, task, "node lost", node, infra=True)
    if state is jobs.TaskState.FAILED_TO_START:
        return Failure(jobs.FailureClass.LAUNCH_ERROR, task, f"failed to start: {message}",
                       node, infra=node_gone)
    code = -1 if exit_code is None else exit_code
    reason = jobs.exit_reason(code)
    lines = log_tail.splitlines()[-LOG_TAIL_LINES:]
    klass = jobs.FailureClass.USER_EXIT
    if out_of_memory:
        klass, reason = jobs.FailureClass.OUT_OF_MEMORY, f"{message} ({reason})"
    else:
        klass = next((k for text, k in LOG_CLASSES if any(text in line for line in lines)),
                     klass)
    rule = next((r for r in policy.rules if r.matches(code, lines)), None)
    return Failure(klass, task, reason, node, rule=rule)


# --- what follows ---------------------------------------------------------------------------


class Verdict(enum.StrEnum):
    RESTART = "restart"  #: a new attempt on the same slots, after the backoff
    REQUEUE = "requeue"  #: back to the queue at its old place (`exclude`: not that node)
    FAIL = "fail"  #: the job ends


@dataclasses.dataclass(frozen=True)
class Past:
    """An earlier attempt, as budgets count it."""

    klass: str | None  #: its failure class (None: it completed, or predates classes)
    recover: str | None  #: its end_recover (None: nothing followed it)


@dataclasses.dataclass(frozen=True)
class Decision:
    verdict: Verdict
    why: str = ""  #: for FAIL: why nothing follows
    retry: int = 0  #: this retry's number in the budget it spends
    limit: int | None = None  #: that budget (None: not limited)
    budget: str = ""  #: "" for the job's retry count, else the class with its own budget
    delay_ms: int = 0  #: before a restart
    exclude: str | None = None  #: (REQUEUE) the node kept out of the next placement

    @property
    def recover(self) -> jobs.EndRecover | None:
        if self.verdict is Verdict.RESTART:
            return jobs.EndRecover.PROC_RESTART
        if self.verdict is Verdict.REQUEUE:
            return (jobs.EndRecover.JOB_RESCHEDULE_WITH_TAINT if self.exclude
                    else jobs.EndRecover.JOB_RESCHEDULE)
        return None

    def retry_text(self) -> str:
        of = f" of {self.limit}" if self.limit is not None else ""
        budget = f"{self.budget} " if self.budget else ""
        return f"{budget}retry {self.retry}{of}"


#: classes after which nothing is ever retried
NEVER_RETRIED = frozenset({jobs.FailureClass.TIMEOUT, jobs.FailureClass.STOPPED})


def decide(f: Failure, policy: Policy, history: Sequence[Past]) -> Decision:
    """What follows failure `f`, given the job's earlier attempts (`history`).

    An infrastructure failure (its node lost, or a launch its node caused to fail) puts
    the job back in the queue and spends nothing but a budget of its class, if the job set
    one; any other spends the class's own budget, if set, else the job's retry count.
    A rule's `no_retry` holds unless the job retries unconditionally; a hang is retried
    only with `hang-retry`; a timeout or a stop never.
    """
    if f.klass in NEVER_RETRIED:
        return Decision(Verdict.FAIL, why="never retried")
    if f.klass is jobs.FailureClass.HANG and not policy.hang_retry:
        return Decision(Verdict.FAIL, why=f"{jobs.HANG_RETRY_ANNOTATION} is not set")
    if f.action is faultspec.Action.NO_RETRY and not policy.unconditional:
        assert f.rule is not None
        return Decision(Verdict.FAIL, why=f"{f.rule.describe()}: do not retry")
    infra = f.infra or f.klass in jobs.INFRASTRUCTURE
    own = policy.budgets.get(f.klass)
    if own is not None or infra:  # (an infrastructure class without a budget: no limit)
        limit: int | None = own
        spent = sum(1 for a in history if a.klass == f.klass and a.recover)
    elif f.klass is jobs.FailureClass.LOST:
        # Whether a lost task ran cannot be known (its server crashed, or failed over): it
        # is restarted as often as the retry count allows, counted apart from it.
        limit = policy.retry_limit
        spent = sum(1 for a in history if a.klass == f.klass and a.recover)
    else:
        limit = policy.retry_limit
        spent = sum(1 for a in history if _spends_retry_count(a, policy))
    budget = f.klass.value if own is not None else ""
    if limit is not None and spent >= limit:
        left = (f"its {budget} budget of {limit} is spent" if budget
                else f"no retry left ({spent} of {limit} used)" if limit else "no retries")
        return Decision(Verdict.FAIL, why=left)
    retry = Decision(Verdict.RESTART, retry=spent + 1, limit=limit, budget=budget)
    if infra:  # a node that left is gone anyway: nothing to keep the job off
        return dataclasses.replace(retry, verdict=Verdict.REQUEUE)
    if f.action is faultspec.Action.RETRY_ELSEWHERE:
        return dataclasses.replace(retry, verdict=Verdict.REQUEUE, exclude=f.node or None)
    restarts = sum(1 for a in history if a.recover == jobs.EndRecover.PROC_RESTART.value)
    return dataclasses.replace(retry, delay_ms=delay_ms(policy.backoff, restarts + 1))


def _spends_retry_count(a: Past, policy: Policy) -> bool:
    """Whether an earlier attempt's recovery spent the job's retry count: an in-place
    restart or a requeue to another node after a fault of the job's, of a class without a
    budget of its own (a plain requeue is the infrastructure's, and spends nothing)."""
    if a.recover not in (jobs.EndRecover.PROC_RESTART.value,
                         jobs.EndRecover.JOB_RESCHEDULE_WITH_TAINT.value):
        return False
    try:
        klass = jobs.FailureClass(a.klass or jobs.FailureClass.USER_EXIT.value)
    except ValueError:
        return True
    return klass not in policy.budgets and klass is not jobs.FailureClass.LOST


def delay_ms(backoff: faultspec.Backoff, n: int) -> int:
    """The wait before the `n`th restart in place (1 for the first): `initial`, times
    `factor` for each restart before it, never more than `max`."""
    if backoff.initial == 0:
        return 0
    seconds = min(float(backoff.max), backoff.initial * backoff.factor ** min(n - 1, 64))
    return round(seconds * 1000)


# --- hangs and run time ---------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Activity:
    """What a running task was last seen doing (times in ms since the epoch)."""

    task: str
    since: int  #: when it was started
    log_at: int | None  #: when its log last grew
    busy_at: int | None  #: its last resource sample that shows CPU or GPU use
    sampled_at: int | None  #: its last resource sample


def silence(now: int, timeout_s: int, tasks: Sequence[Activity]) -> str | None:
    """What was silent, and for how long, when every task of a job has written no log and
    used no CPU or GPU for `timeout_s`; None while any has not (or no sample has shown a
    task idle yet: without samples nothing is judged hung)."""
    if not tasks or timeout_s <= 0:
        return None
    quiet_log, quiet_use = [], []
    for a in tasks:
        log_from = max(a.since, a.log_at or 0)
        use_from = max(a.since, a.busy_at or 0)
        if a.sampled_at is None or a.sampled_at <= use_from:
            return None
        if now - max(log_from, use_from) < timeout_s * 1000:
            return None
        quiet_log.append(now - log_from)
        quiet_use.append(now - use_from)
    who = tasks[0].task if len(tasks) == 1 else f"its {len(tasks)} tasks"
    return (f"{who} wrote no log for {duration(min(quiet_log) / 1000)} and used no CPU or "
            f"GPU for {duration(min(quiet_use) / 1000)} (hang timeout {duration(timeout_s)})")


def past_run_time(policy: Policy, start_time: int | None, now: int) -> bool:
    return (policy.max_run_time is not None and start_time is not None
            and now - start_time >= policy.max_run_time * 1000)


def duration(seconds: float) -> str:
    """45 s, 31 min, 2 h 5 min."""
    s = int(seconds)
    if s < 120:
        return f"{s} s"
    if s < 7200:
        return f"{s // 60} min"
    return f"{s // 3600} h {s % 3600 // 60} min"
