"""`spec.fault_tolerance`: corral's extension of the job spec for what follows a fault.

ModelArts' three annotations (`fault-tolerance/job-retry-num`, `.../job-unconditional-
retry`, `.../hang-retry`) say how often and whether; this says the rest: rules by exit
code or log line, a budget per failure class, the backoff between restarts, the hang
timeout, a maximum run time and the checkpoint channel. Every number has both bounds, as
everywhere in the API (see specs.py), and a refusal says what is allowed.

Log patterns are plain substrings, never regular expressions: a pattern is matched by the
server on the log of every failed task, and a regular expression a user wrote could take
the server's time without end (catastrophic backtracking).
"""

from __future__ import annotations

import enum
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from corral.domain import jobs

#: seconds; a year
MAX_RUN_TIME = 365 * 24 * 3600
#: seconds; a week
MAX_HANG_TIMEOUT = 7 * 24 * 3600
#: seconds; a day
MAX_BACKOFF = 24 * 3600
MAX_RULES = 32
MAX_EXIT_CODES = 32
MAX_PATTERN = 256
#: classes a budget may be set for: those that can be retried (a preempted job always
#: goes back to the queue; a timeout and a stop are never retried)
BUDGETED = (jobs.FailureClass.USER_EXIT, jobs.FailureClass.OUT_OF_MEMORY,
            jobs.FailureClass.LAUNCH_ERROR, jobs.FailureClass.LOST,
            jobs.FailureClass.NODE_LOST, jobs.FailureClass.HANG)

#: the variable naming the job's checkpoint folder (its `checkpoint` channel): every
#: attempt writes there, and one after the first resumes from it
CHECKPOINT_ENV = "CORRAL_CHECKPOINT_DIR"

ExitCode = Annotated[int, Field(ge=-255, le=255)]
Budget = Annotated[int, Field(ge=0, le=jobs.MAX_RETRIES)]


class Action(enum.StrEnum):
    RETRY = "retry"  #: restart in place, on the same slots (the default for any failure)
    NO_RETRY = "no_retry"  #: fail now (unless the job retries unconditionally)
    #: back to the queue, the node it failed on kept out of its next placement
    RETRY_ELSEWHERE = "retry_elsewhere"


class _Model(BaseModel):
    # As the rest of the spec: unknown keys are dropped by the API (lenient, as ModelArts
    # is) and refused by `corral submit`, which walks these fields.
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class Backoff(_Model):
    """The wait before the nth restart in place: initial * factor^(n-1), at most max."""

    initial: int = Field(default=5, ge=0, le=MAX_BACKOFF, description="seconds (0: none)")
    factor: float = Field(default=2.0, ge=1.0, le=10.0)
    max: int = Field(default=300, ge=0, le=MAX_BACKOFF, description="seconds")

    @model_validator(mode="after")
    def _ordered(self) -> Backoff:
        if self.max < self.initial:
            raise ValueError("backoff.max must be at least backoff.initial")
        return self


class Rule(_Model):
    """A failed task's end that it matches (every condition given), and what follows."""

    exit_codes: list[ExitCode] | None = Field(default=None, min_length=1,
                                              max_length=MAX_EXIT_CODES)
    log_contains: str | None = Field(
        default=None, min_length=1, max_length=MAX_PATTERN,
        description="a plain substring (no regular expression) of one of the last 200 "
        "lines of the task's log")
    action: Action

    @field_validator("exit_codes")
    @classmethod
    def _codes(cls, v: list[int] | None) -> list[int] | None:
        if v is not None and 0 in v:
            raise ValueError("exit code 0 is success: a rule matches failures")
        return v

    @field_validator("log_contains")
    @classmethod
    def _one_line(cls, v: str | None) -> str | None:
        if v is not None and ("\n" in v or "\r" in v or not v.strip()):
            raise ValueError("log_contains is matched line by line: give one line of text")
        return v

    @model_validator(mode="after")
    def _something(self) -> Rule:
        if self.exit_codes is None and self.log_contains is None:
            raise ValueError("a rule needs exit_codes or log_contains (or both)")
        return self


class FaultTolerance(_Model):
    """corral: `spec.fault_tolerance`."""

    max_run_time: int | None = Field(
        default=None, ge=1, le=MAX_RUN_TIME,
        description="seconds from the job's start; past it the job fails, class timeout")
    hang_timeout: int | None = Field(
        default=None, ge=0, le=MAX_HANG_TIMEOUT,
        description="seconds without log output nor CPU or GPU use after which the job "
        "is hung (0: never; default: the server's hang_timeout, 30 min)")
    backoff: Backoff | None = None
    budgets: dict[str, Budget] = Field(
        default_factory=dict, description="restarts allowed per failure class, instead of "
        "the retry count")
    rules: list[Rule] = Field(default_factory=list, max_length=MAX_RULES)
    checkpoint: str | None = Field(
        default=None, description="an output channel: every attempt gets its folder as "
        "CORRAL_CHECKPOINT_DIR, to write checkpoints to and (after the first) resume from")

    @field_validator("budgets")
    @classmethod
    def _classes(cls, v: dict[str, int]) -> dict[str, int]:
        allowed = [c.value for c in BUDGETED]
        for key in v:
            if key not in allowed:
                raise ValueError(f"budgets: {key!r} is not a failure class that is retried; "
                                 f"one of {', '.join(allowed)}")
        return v


def check_annotations(annotations: dict[str, Any]) -> None:
    """The fault-tolerance annotations must say what they mean (ValueError otherwise)."""
    raw = annotations.get(jobs.RETRY_ANNOTATION)
    if raw is not None:
        try:
            n = int(raw)
        except ValueError:
            raise ValueError(f"{jobs.RETRY_ANNOTATION} must be an integer") from None
        if not 0 <= n <= jobs.MAX_RETRIES:
            raise ValueError(f"{jobs.RETRY_ANNOTATION} must be between 0 and {jobs.MAX_RETRIES}")
    for key in (jobs.UNCONDITIONAL_ANNOTATION, jobs.HANG_RETRY_ANNOTATION):
        value = annotations.get(key)
        if value is not None and str(value).strip().lower() not in ("true", "false"):
            raise ValueError(f"{key} must be true or false")
