"""Notebooks: a JupyterLab on the platform's resources that stops by itself.

A notebook is an object of its own job kind (`kinds/notebooks/`). Each time it starts it
runs a *session*: an ordinary training job that runs JupyterLab, queued, placed and
accounted like any other. What is stored is the notebook's own `State`; the `Status` a
user sees (ModelArts' notebook statuses) is derived from it and its session job's phase.

Two leases stop a session by itself: `timing` stops it at `stops_at` (4 hours after it
started unless renewed, as OpenI Cloudbrain's debug tasks do), `idle` once nothing has
happened in it for the lease's duration (no kernel busy, no kernel or terminal activity,
no change made through the proxy, no GPU use).
"""

from __future__ import annotations

import enum
import re
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from corral.domain import errors, jobs, machines, specs

#: the job kind whose objects notebooks are (the `owner_kind` of their session jobs)
KIND = "notebook"
#: the default timing lease: 4 hours, as Cloudbrain's autoStopDuration
DEFAULT_LEASE_MS = 4 * 3600 * 1000
#: a lease of at least a second and at most a year
MIN_LEASE_MS = 1000
MAX_LEASE_MS = 366 * 24 * 3600 * 1000
#: GPU utilisation (percent) from which a session's GPUs count as in use
GPU_BUSY_PERCENT = 5.0


class State(enum.StrEnum):
    """What the controller keeps of a notebook (the `notebooks.state` column)."""

    STARTING = "starting"  #: a session is asked for; JupyterLab does not answer yet
    RUNNING = "running"  #: JupyterLab answers
    STOPPING = "stopping"  #: asked to stop: Jupyter's shutdown, then its job's
    STOPPED = "stopped"  #: no session; the workspace stays
    FAILED = "failed"  #: its session ended by itself, or could not start
    DELETING = "deleting"  #: its session is being stopped, then it is gone


_S = State
#: state -> the states it may move to (drawn in docs/notebooks.md). A running session
#: queued again (its node lost) is starting again; a deleted notebook's row goes once its
#: session has ended.
TRANSITIONS: dict[State, frozenset[State]] = {
    _S.STARTING: frozenset({_S.RUNNING, _S.STOPPING, _S.STOPPED, _S.FAILED, _S.DELETING}),
    _S.RUNNING: frozenset({_S.STARTING, _S.STOPPING, _S.STOPPED, _S.FAILED, _S.DELETING}),
    _S.STOPPING: frozenset({_S.STOPPED, _S.DELETING}),
    _S.STOPPED: frozenset({_S.STARTING, _S.DELETING}),
    _S.FAILED: frozenset({_S.STARTING, _S.DELETING}),
    _S.DELETING: frozenset(),
}
#: the state a new notebook is made in
START = State.STARTING

#: states in which a notebook has (or is getting) a session
LIVE = frozenset({State.STARTING, State.RUNNING, State.STOPPING, State.DELETING})
#: states a user may start a notebook from, or stop it from, or change it in
STARTABLE = frozenset({State.STOPPED, State.FAILED})
STOPPABLE = machines.allowed_from(TRANSITIONS, State.STOPPING)
DELETABLE = machines.allowed_from(TRANSITIONS, State.DELETING)


class Status(enum.StrEnum):
    """ModelArts' notebook statuses, as `status` shows them."""

    CREATING = "CREATING"  #: its first session is starting
    STARTING = "STARTING"  #: a later session is starting
    RUNNING = "RUNNING"
    STOPPING = "STOPPING"
    STOPPED = "STOPPED"
    DELETING = "DELETING"
    CREATE_FAILED = "CREATE_FAILED"  #: its first session never came up
    START_FAILED = "START_FAILED"  #: a later session never came up
    ERROR = "ERROR"  #: its session ended by itself after it came up


class LeaseType(enum.StrEnum):
    TIMING = "timing"  #: stops at `stops_at`
    IDLE = "idle"  #: stops after `duration` with nothing happening


def status(state: str, *, session: int, ready: bool) -> Status:
    """The status a user sees; `ready`: the session's JupyterLab has answered."""
    match State(state):
        case State.STARTING:
            return Status.CREATING if session <= 1 else Status.STARTING
        case State.RUNNING:
            return Status.RUNNING
        case State.STOPPING:
            return Status.STOPPING
        case State.STOPPED:
            return Status.STOPPED
        case State.DELETING:
            return Status.DELETING
        case State.FAILED:
            if ready:
                return Status.ERROR
            return Status.CREATE_FAILED if session <= 1 else Status.START_FAILED


#: ModelArts' steps of starting an instance
STEPS = ((1, "Prepare storage"), (2, "Prepare compute resources"), (3, "Configure the network"),
         (4, "Initialize the instance"))


def progress(state: str, job_phase: str | None, wait_reason: str | None) -> list[dict[str, Any]]:
    """`action_progress`: where a starting session is (empty for any other state)."""
    if state != State.STARTING:
        return []
    placed = job_phase == jobs.Phase.RUNNING
    steps = ["COMPLETED",
             "COMPLETED" if placed else "PROCESSING",
             "COMPLETED" if placed else "WAITING",
             "PROCESSING" if placed else "WAITING"]
    out = []
    for (step, words), status_ in zip(STEPS, steps, strict=True):
        if step == 2 and not placed and wait_reason:
            words = f"{words}: {wait_reason}"
        out.append({"step": step, "status": status_, "description": words})
    return out


def idle_words(ms: int) -> str:
    """'idle for 60 min' (whole minutes from a minute, else seconds)."""
    seconds = ms // 1000
    return f"idle for {seconds // 60} min" if seconds >= 60 else f"idle for {seconds} s"


def duration_words(ms: int) -> str:
    seconds = ms // 1000
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds // 3600} h"
    if seconds >= 60:
        return f"{seconds // 60} min"
    return f"{seconds} s"


def idle_since(*moments: int | None) -> int:
    """When something last happened: the latest of the moments known."""
    return max(m for m in moments if m is not None)


def lease_stop(lease_type: str, lease_ms: int, *, now: int, stops_at: int | None,
               last_active: int | None, busy: bool) -> str | None:
    """Why a running session is to stop now under its lease, or None. A busy kernel is
    never idle, however quiet."""
    if lease_type == LeaseType.TIMING:
        return "lease expired" if stops_at is not None and now >= stops_at else None
    if busy or last_active is None or now - last_active < lease_ms:
        return None
    return idle_words(lease_ms)


_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|min|h|d)?", re.I)
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_duration(text: str) -> int:
    """Milliseconds of '4h', '90m', '2h30m', '45s' (a bare number is in seconds)."""
    text = text.strip().lower()
    total, pos = 0.0, 0
    for m in _DURATION.finditer(text):
        if m.start() != pos or not m.group(0):
            break
        total += float(m.group(1)) * _UNIT_MS[m.group(2) or "s"]
        pos = m.end()
        while pos < len(text) and text[pos] == " ":
            pos += 1
    if not text or pos != len(text) or total <= 0:
        raise errors.BadParameter(f"'{text}' is not a duration: say 4h, 90m, 2h30m or 45s")
    return round(total)


# --- request bodies (ModelArts' shapes) ------------------------------------------------------

#: ModelArts: letters, digits, '-' and '_', at most 128 (corral: starting with one of the first)
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$"
Name = Annotated[str, specs.Pattern(NAME_PATTERN, "notebook names are 1-128 letters, digits, "
                                    "'_' or '-', starting with a letter or digit")]
Description = Annotated[str, specs.Pattern(r"^[^&<>\"'/]{0,512}$",
                                           "a description has at most 512 characters, "
                                           "none of & < > \" ' /")]
LeaseMs = Annotated[int, Field(ge=MIN_LEASE_MS, le=MAX_LEASE_MS)]


class LeaseReq(specs.Model):
    """How a notebook stops by itself: `duration` ms from its start (timing), or of
    nothing happening (idle)."""

    duration: LeaseMs | None = None
    type: LeaseType = LeaseType.TIMING


class VolumeReq(specs.Model):
    """Where the workspace is: MANAGED, a folder corral makes in the project's tree;
    DEDICATED, the folder `uri`, which must lie in storage the project may use."""

    category: str = "EFS"
    ownership: Literal["MANAGED", "DEDICATED"] = "MANAGED"
    uri: Annotated[str, Field(max_length=4096)] | None = None
    capacity: specs.Count | None = None

    @model_validator(mode="after")
    def _uri(self) -> VolumeReq:
        if self.ownership == "DEDICATED" and not self.uri:
            raise ValueError("volume: a DEDICATED volume needs `uri`, the workspace folder")
        if self.uri is not None and not self.uri.startswith("/"):
            raise ValueError("volume.uri: the workspace folder is an absolute path")
        return self


class NotebookCreate(specs.Model):
    """The body of `POST /v1/{project_id}/notebooks`."""

    name: Name
    description: Description = ""
    flavor: Annotated[str, Field(min_length=1, max_length=128)]
    #: the engine whose Python runs JupyterLab (default: the server's setting)
    image_id: Annotated[str, Field(max_length=128)] | None = None
    pool_id: specs.PoolId | None = None
    volume: VolumeReq = Field(default_factory=VolumeReq)
    lease: LeaseReq | None = None
    #: ModelArts: a timing lease of this many ms, over `lease`
    duration: LeaseMs | None = None
    workspace_id: str = "0"
    feature: str = "NOTEBOOK"


class NotebookUpdate(specs.Model):
    """The body of `PUT /v1/{project_id}/notebooks/{id}`: the flavor only while stopped."""

    name: Name | None = None
    description: Description | None = None
    flavor: Annotated[str, Field(min_length=1, max_length=128)] | None = None
    image_id: Annotated[str, Field(max_length=128)] | None = None


def lease_of(body: LeaseReq | None, duration: int | None, *, default_ms: int,
             default_idle_ms: int) -> tuple[LeaseType, int]:
    """(type, duration in ms) a request asks for: `duration` alone is a timing lease, as
    ModelArts has it."""
    if duration is not None:
        return LeaseType.TIMING, duration
    if body is None:
        return LeaseType.TIMING, default_ms
    kind = LeaseType(body.type)
    return kind, body.duration or (default_ms if kind is LeaseType.TIMING else default_idle_ms)
