"""The training-job state machine, as data.

Phases and secondary phases are the ModelArts v2 enums. Which phase may follow which is
the `TRANSITIONS` table and nothing else; the store refuses any change not in it. Why a job
failed is a separate field (`FailureClass` plus a message), never more phases.
"""

from __future__ import annotations

import enum


class Phase(enum.StrEnum):
    CREATING = "Creating"  #: accepted, not yet admitted to the queue
    PENDING = "Pending"  #: admitted, waiting for resources
    RUNNING = "Running"  #: its tasks are started (also while restarting after a fault)
    FAILED = "Failed"  #: a task failed and no retry is left, or it could not be started
    COMPLETED = "Completed"  #: every task exited with 0
    TERMINATING = "Terminating"  #: a user asked to stop it; its processes are being stopped
    TERMINATED = "Terminated"  #: stopped on request; no process of it is left
    ABNORMAL = "Abnormal"  #: corral lost track of a task and cannot tell how it ended


class SecondaryPhase(enum.StrEnum):
    CREATING = "Creating"  #: accepted, not yet admitted
    QUEUING = "Queuing"  #: waiting for resources
    RUNNING = "Running"  #: running
    FAILED = "Failed"  #: a task exited non-zero with no retry left
    COMPLETED = "Completed"  #: finished successfully
    TERMINATING = "Terminating"  #: being stopped
    TERMINATED = "Terminated"  #: stopped
    CREATE_FAILED = "CreateFailed"  #: its tasks could not be started
    TERMINATED_FAILED = "TerminatedFailed"  #: stop was asked but a process could not be killed
    UNKNOWN = "Unknown"  #: no information
    LOST = "Lost"  #: a task vanished while the server was down and its exit code is unknown


#: phase -> phases it may move to
TRANSITIONS: dict[Phase, frozenset[Phase]] = {
    Phase.CREATING: frozenset({Phase.PENDING, Phase.TERMINATING, Phase.FAILED}),
    Phase.PENDING: frozenset({Phase.RUNNING, Phase.TERMINATING, Phase.FAILED}),
    Phase.RUNNING: frozenset(
        {Phase.COMPLETED, Phase.FAILED, Phase.ABNORMAL, Phase.TERMINATING, Phase.PENDING}
    ),
    Phase.TERMINATING: frozenset({Phase.TERMINATED}),
    Phase.COMPLETED: frozenset(),
    Phase.FAILED: frozenset(),
    Phase.TERMINATED: frozenset(),
    Phase.ABNORMAL: frozenset(),
}

TERMINAL: frozenset[Phase] = frozenset(p for p, nxt in TRANSITIONS.items() if not nxt)

#: phases in which a job holds resources on a node
ACTIVE: frozenset[Phase] = frozenset({Phase.RUNNING, Phase.TERMINATING})

#: phases from which a user may terminate a job
TERMINABLE: frozenset[Phase] = frozenset(
    p for p, nxt in TRANSITIONS.items() if Phase.TERMINATING in nxt
)


def allowed_from(target: Phase) -> frozenset[Phase]:
    """Every phase from which `target` may be entered."""
    return frozenset(p for p, nxt in TRANSITIONS.items() if target in nxt)


class FailureClass(enum.StrEnum):
    """Why an attempt ended other than by completing, and so why a job failed (the job's
    `failure_class`, each running record's). The policy that decides what follows each one
    is domain/faults.py; docs/fault-tolerance.md lists them for users."""

    USER_EXIT = "user_exit"  #: a task of the job exited with a non-zero code
    #: a task was killed for using more memory than its flavor gives (the kernel's OOM
    #: killer, in the task's cgroup), or its log says CUDA ran out of memory
    OUT_OF_MEMORY = "out_of_memory"
    LAUNCH_ERROR = "launch_error"  #: a task could not be started (missing code, interpreter)
    LOST = "lost"  #: a task disappeared and its exit code cannot be known
    NODE_LOST = "node_lost"  #: a task's node left the cluster (an infrastructure fault)
    #: the job's tasks wrote no log and used no CPU or GPU for its hang timeout
    HANG = "hang"
    PREEMPTED = "preempted"  #: stopped to make room for another job, and queued again
    TIMEOUT = "timeout"  #: it ran past its max_run_time
    STOPPED = "stopped"  #: stopped on a user's request

    @classmethod
    def _missing_(cls, value: object) -> FailureClass | None:
        # Jobs stopped before the class had its name were stored as "terminated".
        return cls.STOPPED if value == "terminated" else None


#: classes whose fault is the infrastructure's, not the job's: they never spend the job's
#: retry count (only a budget of their own, when the job sets one)
INFRASTRUCTURE: frozenset[FailureClass] = frozenset(
    {FailureClass.NODE_LOST, FailureClass.PREEMPTED})


class StartType(enum.StrEnum):
    INIT_OR_RESCHEDULED = "init_or_rescheduled"  #: first run after being placed
    RESTARTED = "restarted"  #: run after an in-place process restart


class EndRecover(enum.StrEnum):
    PROC_RESTART = "proc_restart"  #: processes restarted in place
    JOB_RESCHEDULE = "job_reschedule"  #: job returned to the queue and placed again
    #: job returned to the queue, the node it failed on kept out of its next placement
    JOB_RESCHEDULE_WITH_TAINT = "job_reschedule_with_taint"


class TaskState(enum.StrEnum):
    LAUNCHING = "launching"  #: recorded, process may or may not have been started yet
    RUNNING = "running"  #: process started, handle recorded
    EXITED = "exited"  #: process ended; exit_code holds its code
    LOST = "lost"  #: process gone, exit code unknown
    NODE_LOST = "node_lost"  #: its node left the cluster; the job is placed again
    FAILED_TO_START = "failed_to_start"  #: the executor could not start it


TASK_DONE: frozenset[TaskState] = frozenset(
    {TaskState.EXITED, TaskState.LOST, TaskState.NODE_LOST, TaskState.FAILED_TO_START}
)

RETRY_ANNOTATION = "fault-tolerance/job-retry-num"
#: "true": restart after any failure within the retry count, whatever the rules say
UNCONDITIONAL_ANNOTATION = "fault-tolerance/job-unconditional-retry"
#: "true": a hung job is restarted (within the retry count); else it fails, `hanged`
HANG_RETRY_ANNOTATION = "fault-tolerance/hang-retry"
MAX_RETRIES = 100


def task_names(node_count: int) -> list[str]:
    return [f"worker-{i}" for i in range(node_count)]


def exit_reason(exit_code: int) -> str:
    """The `end_reason` text ModelArts uses for a task that exited."""
    return f"exit with {exit_code}"
