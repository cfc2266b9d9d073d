"""The fault-tolerance policy as tables: classes, rules, budgets, backoff, hangs, and the
spec extension's refusals."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

from corral.domain import errors, faults, faultspec, jobs, specs
from tests import factories

C = jobs.FailureClass
RESTART, REQUEUE, FAIL = faults.Verdict.RESTART, faults.Verdict.REQUEUE, faults.Verdict.FAIL


def policy(retries: int = 0, *, unconditional: bool = False, hang_retry: bool = False,
           **ft: Any) -> faults.Policy:
    annotations = {jobs.RETRY_ANNOTATION: str(retries)}
    if unconditional:
        annotations[jobs.UNCONDITIONAL_ANNOTATION] = "true"
    if hang_retry:
        annotations[jobs.HANG_RETRY_ANNOTATION] = "True"
    return faults.Policy.of(annotations, faultspec.FaultTolerance.model_validate(ft))


def exited(p: faults.Policy, code: int, log: str = "", *, oom: bool = False) -> faults.Failure:
    return faults.classify(p, task="worker-0", node="n1", state=jobs.TaskState.EXITED,
                           exit_code=code, out_of_memory=oom, log_tail=log,
                           message="out of memory: used more than 1024 MB" if oom else "")


def past(*pairs: tuple[str | None, str | None]) -> list[faults.Past]:
    return [faults.Past(k, r) for k, r in pairs]


PROC, TAINT, RESCHED = "proc_restart", "job_reschedule_with_taint", "job_reschedule"
RULES = [{"exit_codes": [3, 4], "action": "no_retry"},
         {"log_contains": "bad node", "action": "retry_elsewhere"},
         {"exit_codes": [5], "log_contains": "flaky", "action": "retry"}]


# --- classify: what a task's end was -------------------------------------------------------

@pytest.mark.parametrize(("code", "log", "oom", "klass", "action", "reason"), [
    (1, "", False, C.USER_EXIT, "retry", "exit with 1"),
    (137, "", True, C.OUT_OF_MEMORY, "retry",
     "out of memory: used more than 1024 MB (exit with 137)"),
    (137, "", False, C.USER_EXIT, "retry", "exit with 137"),  # killed, but not for memory
    (1, "step 3\nRuntimeError: CUDA out of memory. Tried", False, C.OUT_OF_MEMORY,
     "no_retry", "exit with 1"),
    (3, "", False, C.USER_EXIT, "no_retry", "exit with 3"),
    # The job's own rule decides first; the log still says what the failure was.
    (4, "CUDA out of memory", False, C.OUT_OF_MEMORY, "no_retry", "exit with 4"),
    (1, "x\nthis bad node again\n", False, C.USER_EXIT, "retry_elsewhere", "exit with 1"),
    (5, "flaky", False, C.USER_EXIT, "retry", "exit with 5"),
    (6, "flaky", False, C.USER_EXIT, "retry", "exit with 6"),  # both conditions, or none
    (5, "", False, C.USER_EXIT, "retry", "exit with 5"),
])
def test_a_failed_exit_is_classified_by_the_rules_then_the_defaults(
        code: int, log: str, oom: bool, klass: C, action: str, reason: str) -> None:
    f = exited(policy(rules=RULES), code, log, oom=oom)
    assert (f.klass, f.action.value, f.reason) == (klass, action, reason)


def test_a_jobs_own_rule_decides_what_follows_and_the_class_keeps_its_budget() -> None:
    p = policy(3, budgets={"out_of_memory": 1},
               rules=[{"log_contains": "CUDA out of memory", "action": "retry"}])
    f = exited(p, 1, "RuntimeError: CUDA out of memory. Tried to allocate 2 GiB")
    assert (f.klass, f.action, f.rule and f.rule.default) == (
        C.OUT_OF_MEMORY, faultspec.Action.RETRY, False)
    first = faults.decide(f, p, [])
    assert (first.verdict, first.retry_text()) == (RESTART, "out_of_memory retry 1 of 1")
    second = faults.decide(f, p, past((C.OUT_OF_MEMORY.value, PROC)))
    assert (second.verdict, second.why) == (FAIL, "its out_of_memory budget of 1 is spent")
    # ... and a failure of another kind still has the job's retry count
    other = faults.decide(exited(p, 1), p, past((C.OUT_OF_MEMORY.value, PROC)))
    assert (other.verdict, other.retry_text()) == (RESTART, "retry 1 of 3")


def test_only_the_last_lines_of_a_log_are_matched() -> None:
    old = "CUDA out of memory\n" + "ok\n" * faults.LOG_TAIL_LINES
    assert exited(policy(), 1, old).rule is None
    assert exited(policy(), 1, old + "CUDA out of memory\n").rule is not None


@pytest.mark.parametrize(("state", "gone", "klass", "infra", "reason"), [
    (jobs.TaskState.LOST, False, C.LOST, False, "lost"),
    (jobs.TaskState.NODE_LOST, False, C.NODE_LOST, True, "node lost"),
    (jobs.TaskState.FAILED_TO_START, False, C.LAUNCH_ERROR, False, "failed to start: no such"),
    (jobs.TaskState.FAILED_TO_START, True, C.LAUNCH_ERROR, True, "failed to start: no such"),
])
def test_ends_without_an_exit_code(state: jobs.TaskState, gone: bool, klass: C, infra: bool,
                                   reason: str) -> None:
    f = faults.classify(policy(), task="worker-1", node="n2", state=state, exit_code=None,
                        message="no such", out_of_memory=False, node_gone=gone)
    assert (f.klass, f.infra, f.reason) == (klass, infra, reason)


# --- decide: what follows ----------------------------------------------------------------

CASES: list[tuple[str, faults.Policy, faults.Failure, list[faults.Past], Any]] = [
    ("no retries: fail", policy(0), exited(policy(), 1), [], (FAIL, "no retries")),
    ("a retry left", policy(2), exited(policy(), 1), past((C.USER_EXIT, PROC)),
     (RESTART, "retry 2 of 2")),
    ("retries spent", policy(2), exited(policy(), 1),
     past((C.USER_EXIT, PROC), (C.OUT_OF_MEMORY, PROC)), (FAIL, "no retry left (2 of 2 used)")),
    ("attempts before classes count as restarts", policy(1), exited(policy(), 1),
     past((None, PROC)), (FAIL, "no retry left (1 of 1 used)")),
    ("requeues for the infrastructure spend nothing", policy(1), exited(policy(), 1),
     past((C.NODE_LOST, RESCHED), (C.PREEMPTED, RESCHED), (C.USER_EXIT, None)),
     (RESTART, "retry 1 of 1")),
    ("a requeue elsewhere spends a retry", policy(1), exited(policy(), 1),
     past((C.USER_EXIT, TAINT)), (FAIL, "no retry left (1 of 1 used)")),
    ("no_retry rule", policy(5, rules=RULES), exited(policy(rules=RULES), 3), [],
     (FAIL, "rule exit code 3 or 4: do not retry")),
    ("CUDA out of memory is not retried", policy(5),
     exited(policy(), 1, "CUDA out of memory"), [],
     (FAIL, "default rule log contains 'CUDA out of memory': do not retry")),
    ("unconditional overrides no_retry", policy(5, unconditional=True),
     exited(policy(), 1, "CUDA out of memory"), [], (RESTART, "retry 1 of 5")),
    ("unconditional stays within the count", policy(1, unconditional=True),
     exited(policy(), 1, "CUDA out of memory"), past((C.OUT_OF_MEMORY, PROC)),
     (FAIL, "no retry left (1 of 1 used)")),
    ("retry elsewhere", policy(1, rules=RULES),
     exited(policy(rules=RULES), 1, "bad node"), [], (REQUEUE, "retry 1 of 1", "n1")),
    ("a class budget instead of the count", policy(0, budgets={"out_of_memory": 2}),
     exited(policy(), 137, oom=True), past((C.OUT_OF_MEMORY, PROC)),
     (RESTART, "out_of_memory retry 2 of 2")),
    ("a class budget spent", policy(9, budgets={"out_of_memory": 1}),
     exited(policy(), 137, oom=True), past((C.OUT_OF_MEMORY, PROC)),
     (FAIL, "its out_of_memory budget of 1 is spent")),
    ("a class budget leaves the count alone", policy(1, budgets={"out_of_memory": 3}),
     exited(policy(), 1), past((C.OUT_OF_MEMORY, PROC), (C.OUT_OF_MEMORY, PROC)),
     (RESTART, "retry 1 of 1")),
    ("node lost: requeued, no retries needed", policy(0),
     faults.Failure(C.NODE_LOST, "worker-0", "node lost", "n1", infra=True),
     past((C.NODE_LOST, RESCHED)) * 5, (REQUEUE, "retry 6")),
    ("node lost within its budget", policy(0, budgets={"node_lost": 1}),
     faults.Failure(C.NODE_LOST, "worker-0", "node lost", "n1", infra=True), [],
     (REQUEUE, "node_lost retry 1 of 1")),
    ("node lost past its budget", policy(0, budgets={"node_lost": 1}),
     faults.Failure(C.NODE_LOST, "worker-0", "node lost", "n1", infra=True),
     past((C.NODE_LOST, RESCHED)), (FAIL, "its node_lost budget of 1 is spent")),
    ("a launch its node failed is requeued", policy(0),
     faults.Failure(C.LAUNCH_ERROR, "worker-0", "failed to start: x", "n1", infra=True), [],
     (REQUEUE, "retry 1")),
    ("a launch error of the job's own spends a retry", policy(0),
     faults.Failure(C.LAUNCH_ERROR, "worker-0", "failed to start: x", "n1"), [],
     (FAIL, "no retries")),
    ("a hang without hang-retry fails", policy(3),
     faults.Failure(C.HANG, "", "hanged"), [], (FAIL, "fault-tolerance/hang-retry is not set")),
    ("a hang with hang-retry restarts", policy(3, hang_retry=True),
     faults.Failure(C.HANG, "", "hanged"), [], (RESTART, "retry 1 of 3")),
    ("a hang with its own budget", policy(0, hang_retry=True, budgets={"hang": 1}),
     faults.Failure(C.HANG, "", "hanged"), [], (RESTART, "hang retry 1 of 1")),
    ("a lost task spends no retry of the job's own", policy(1),
     faults.Failure(C.LOST, "worker-0", "lost"), past((C.LOST, PROC)),
     (FAIL, "no retry left (1 of 1 used)")),
    ("a lost task restarts apart from the retry count", policy(1),
     faults.Failure(C.LOST, "worker-0", "lost"), past((C.USER_EXIT, PROC)),
     (RESTART, "retry 1 of 1")),
    ("a fault of the job's own after a lost task still has its retry", policy(1),
     exited(policy(), 1), past((C.LOST, PROC)), (RESTART, "retry 1 of 1")),
    ("a lost task of a job without retries ends it", policy(0),
     faults.Failure(C.LOST, "worker-0", "lost"), [], (FAIL, "no retries")),
    ("a timeout never restarts", policy(5, unconditional=True),
     faults.Failure(C.TIMEOUT, "", "timeout"), [], (FAIL, "never retried")),
]


@pytest.mark.parametrize(("name", "p", "failure", "history", "want"), CASES,
                         ids=[c[0] for c in CASES])
def test_decide(name: str, p: faults.Policy, failure: faults.Failure,
                history: list[faults.Past], want: Any) -> None:
    d = faults.decide(failure, p, history)
    got = (d.verdict, d.why if d.verdict is FAIL else d.retry_text())
    assert got == want[:2]
    if d.verdict is REQUEUE:
        assert d.exclude == (want[2] if len(want) > 2 else None)
        assert d.recover == (jobs.EndRecover.JOB_RESCHEDULE_WITH_TAINT if d.exclude
                             else jobs.EndRecover.JOB_RESCHEDULE)


@pytest.mark.parametrize(("backoff", "delays"), [
    ({}, [5, 10, 20, 40, 80, 160, 300, 300]),
    ({"initial": 1, "factor": 3, "max": 20}, [1, 3, 9, 20, 20]),
    ({"initial": 0}, [0, 0, 0]),
    ({"initial": 7, "factor": 1, "max": 7}, [7, 7, 7]),
])
def test_backoff_grows_to_its_cap(backoff: dict[str, Any], delays: list[int]) -> None:
    b = faultspec.Backoff.model_validate(backoff)
    assert [faults.delay_ms(b, n) / 1000 for n in range(1, len(delays) + 1)] == delays


def test_a_restart_waits_for_the_backoff_of_its_number() -> None:
    p = policy(5)
    d = faults.decide(exited(p, 1), p, past((C.USER_EXIT, PROC), (C.NODE_LOST, RESCHED),
                                            (C.USER_EXIT, PROC)))
    assert (d.verdict, d.delay_ms) == (RESTART, 20_000)  # the third restart in place


# --- hangs ----------------------------------------------------------------------------------

S = 1000  # ms


def act(task: str = "worker-0", since: int = 0, log: int | None = None,
        busy: int | None = None, sampled: int | None = None) -> faults.Activity:
    return faults.Activity(task, since, log, busy, sampled)


@pytest.mark.parametrize(("now", "tasks", "hung"), [
    (100 * S, [act(sampled=99 * S)], True),
    (100 * S, [act(sampled=None)], False),  # never sampled: never judged
    (100 * S, [act(log=80 * S, sampled=99 * S)], False),  # wrote 20 s ago
    (100 * S, [act(busy=99 * S, sampled=99 * S)], False),  # busy in its last sample
    (100 * S, [act(busy=50 * S, sampled=99 * S)], True),
    (100 * S, [act(since=80 * S, sampled=99 * S)], False),  # started 20 s ago
    (100 * S, [act(sampled=99 * S), act("worker-1", log=95 * S, sampled=99 * S)], False),
    (100 * S, [act(sampled=99 * S), act("worker-1", busy=10 * S, sampled=99 * S)], True),
])
def test_a_job_is_hung_when_every_task_is_silent_for_its_timeout(
        now: int, tasks: list[faults.Activity], hung: bool) -> None:
    assert (faults.silence(now, 30, tasks) is not None) == hung


def test_a_hang_says_what_was_silent_and_for_how_long() -> None:
    said = faults.silence(4000 * S, 1800, [act(log=10 * S, busy=2000 * S, sampled=3990 * S),
                                           act("worker-1", sampled=3990 * S)])
    assert said == ("its 2 tasks wrote no log for 66 min and used no CPU or GPU for 33 min "
                    "(hang timeout 30 min)")
    assert faults.silence(4000 * S, 0, [act(sampled=3990 * S)]) is None  # 0: off


@pytest.mark.parametrize(("seconds", "text"), [
    (0, "0 s"), (45.9, "45 s"), (119, "119 s"), (120, "2 min"), (3599, "59 min"),
    (7200, "2 h 0 min"), (7500, "2 h 5 min")])
def test_durations_read_as_people_write_them(seconds: float, text: str) -> None:
    assert faults.duration(seconds) == text


def test_run_time() -> None:
    p = policy(max_run_time=10)
    assert not faults.past_run_time(p, 0, 9999)
    assert faults.past_run_time(p, 0, 10_000)
    assert not faults.past_run_time(p, None, 10**9)  # never started
    assert not faults.past_run_time(policy(), 0, 10**12)


# --- the spec extension and the annotations ---------------------------------------------


def job(annotations: dict[str, Any] | None = None, **ft: Any) -> specs.JobCreate:
    body = factories.make_job(command="true", outputs={"ckpt": "/tmp/ckpt"})
    if annotations:
        body["metadata"]["annotations"] = annotations
    body["spec"]["fault_tolerance"] = ft
    parsed: specs.JobCreate = specs.parse(specs.JobCreate, body)
    return parsed


@pytest.mark.parametrize(("annotations", "ft", "says"), [
    ({"fault-tolerance/job-unconditional-retry": "yes"}, {}, "must be true or false"),
    ({"fault-tolerance/hang-retry": "1"}, {}, "hang-retry must be true or false"),
    ({"fault-tolerance/job-retry-num": "101"}, {}, "between 0 and 100"),
    ({}, {"max_run_time": 0}, "max_run_time: Input should be greater than or equal to 1"),
    ({}, {"max_run_time": 10**12}, "max_run_time: Input should be less than or equal to"),
    ({}, {"hang_timeout": -1}, "hang_timeout: Input should be greater than or equal to 0"),
    ({}, {"hang_timeout": 10**9}, "hang_timeout: Input should be less than or equal to"),
    ({}, {"backoff": {"factor": 0.5}}, "factor: Input should be greater than or equal to 1"),
    ({}, {"backoff": {"initial": 100, "max": 10}}, "backoff.max must be at least"),
    ({}, {"backoff": {"max": 10**6}}, "max: Input should be less than or equal to 86400"),
    ({}, {"budgets": {"timeout": 1}}, "'timeout' is not a failure class that is retried"),
    ({}, {"budgets": {"preempted": 1}}, "'preempted' is not a failure class that is retried"),
    ({}, {"budgets": {"hang": 101}}, "Input should be less than or equal to 100"),
    ({}, {"rules": [{"action": "retry"}]}, "a rule needs exit_codes or log_contains"),
    ({}, {"rules": [{"exit_codes": [0], "action": "retry"}]}, "exit code 0 is success"),
    ({}, {"rules": [{"exit_codes": [256], "action": "retry"}]}, "less than or equal to 255"),
    ({}, {"rules": [{"exit_codes": list(range(1, 40)), "action": "retry"}]}, "at most 32"),
    ({}, {"rules": [{"log_contains": "a\nb", "action": "retry"}]}, "give one line of text"),
    ({}, {"rules": [{"log_contains": "x" * 257, "action": "retry"}]}, "at most 256"),
    ({}, {"rules": [{"log_contains": "x", "action": "maybe"}]}, "action: Input should be"),
    ({}, {"rules": [{"log_contains": "x", "action": "retry"}] * 33}, "at most 32 items"),
    ({}, {"checkpoint": "model"}, "'model' is not an output channel of the job"),
])
def test_the_spec_extension_refuses_what_it_cannot_honour(
        annotations: dict[str, Any], ft: dict[str, Any], says: str) -> None:
    with pytest.raises(errors.BadParameter, match=None) as exc:
        job(annotations, **ft)
    assert says in exc.value.message


def test_a_full_spec_extension_reads_back_as_its_policy() -> None:
    body = job({"fault-tolerance/job-retry-num": 3,
                "fault-tolerance/job-unconditional-retry": True,
                "fault-tolerance/hang-retry": "false"},
               max_run_time=3600, hang_timeout=0, checkpoint="ckpt",
               backoff={"initial": 2, "factor": 1.5, "max": 60}, budgets={"node_lost": 4},
               rules=[{"exit_codes": [42], "log_contains": "NCCL", "action": "retry_elsewhere"}])
    p = faults.Policy.of(body.metadata.annotations, body.spec.fault_tolerance)
    assert (p.retry_limit, p.unconditional, p.hang_retry) == (3, True, False)
    assert (p.max_run_time, p.hang_timeout, dict(p.budgets)) == (3600, 0, {C.NODE_LOST: 4})
    assert p.rules[0] == faults.Matcher(faultspec.Action.RETRY_ELSEWHERE, frozenset({42}),
                                        "NCCL")
    assert p.rules[1:] == faults.DEFAULT_RULES
    assert faults.Policy.of({}, None, hang_timeout=60).hang_timeout == 60  # the server's


# --- the documentation lists every class, rule, key and default ---------------------------

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "fault-tolerance.md"


def _table_rows(text: str, header: str) -> dict[str, str]:
    """The rows of the table whose header row starts with `header`, by their first cell."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {header} "))
    rows = {}
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        rows[cells[0].strip("`")] = " | ".join(cells[1:])
    return rows


def test_the_page_lists_every_failure_class() -> None:
    classes = _table_rows(DOC.read_text(), "class")
    assert set(classes) == {c.value for c in jobs.FailureClass}


def test_the_page_lists_every_key_of_the_spec_extension_with_its_default() -> None:
    keys = _table_rows(DOC.read_text(), "key")
    backoff = faultspec.Backoff()
    want = {**{k: None for k in faultspec.FaultTolerance.model_fields},
            **{f"backoff.{k}": str(getattr(backoff, k)).removesuffix(".0")
               for k in faultspec.Backoff.model_fields},
            **{f"rules[].{k}": None for k in faultspec.Rule.model_fields}}
    want.pop("backoff")
    assert set(keys) == set(want)
    for key, default in want.items():
        if default is not None:
            assert keys[key].split(" | ")[1] == default, key
    assert f"the server's ({faults.DEFAULT_HANG_TIMEOUT} s)" in keys["hang_timeout"]


def test_the_page_lists_the_default_rules_and_the_annotations() -> None:
    text = DOC.read_text()
    rules = _table_rows(text, "rule")
    assert len(rules) == len(faults.DEFAULT_RULES) + 1  # and the keeper's out-of-memory kill
    classes = dict(faults.LOG_CLASSES)
    for r in faults.DEFAULT_RULES:
        [row] = [cells for name, cells in rules.items() if r.log_contains in name]
        assert row.split(" | ")[:2] == [f"`{classes[r.log_contains]}`", f"`{r.action}`"]
    for line, klass in faults.LOG_CLASSES:  # each log line that gives a class is listed
        assert f"`{line}`" in _table_rows(text, "class")[klass.value]
    annotations = _table_rows(text, "annotation")
    assert set(annotations) == {jobs.RETRY_ANNOTATION, jobs.UNCONDITIONAL_ANNOTATION,
                                jobs.HANG_RETRY_ANNOTATION}
    assert set(_table_rows(text, "action")) == {a.value for a in faultspec.Action}
