"""A task this server watches on a Ray node, and its output pulled into its log file.

What a task prints stays on its node, in a file its agent keeps. The server pulls it into
the task's usual log file on the server every `LOG_INTERVAL` while the task runs, and all
of what is left once it has ended, so that logs, previews and `logs -f` work as they do
for a local task.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
from typing import Any

from corral.executors import base
from corral.executors.ray import files
from corral.oskit import beneath

log = logging.getLogger(__name__)

#: how often running tasks' output is pulled to the server
LOG_INTERVAL = 0.5
LOG_CHUNK = 1 << 20


@dataclasses.dataclass
class Task:
    """A task this server watches: its agent, the pending wait, how much log it copied."""

    handle: base.Handle
    actor: Any  #: its node's agent (None for a launch lost before it started)
    log_path: str
    offset: int
    wait_ref: Any
    launch_id: str = ""
    announced: bool = False  #: the scheduler was woken for its wait's answer
    died_at: float | None = None  #: its actor was seen dead on a node Ray calls alive
    result: base.Status | None = None
    outputs: files.Outputs | None = None  #: where its files are copied to
    followed: Any = None  #: its followed inputs (a `follow.Followed`), pushed to its node
    collecting: bool = False  #: its last files are being copied
    collected: bool = False  #: ... and have been
    #: why its last files could not be copied back ("": they were, or it had none)
    files_left: str = ""
    log_refused: bool = False  #: its log could not be written without following a link
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)


def log_path(handle: base.Handle) -> str:
    # The run directory's layout (storage.RunPaths): attempt-N/ctl beside attempt-N/logs.
    return os.path.join(os.path.dirname(handle.control_dir), "logs", f"{handle.task}.log")


def pull(ray: Any, task: Task) -> None:
    """Copy what the task printed since the last pull into its log file on the server."""
    with task.lock:
        while True:
            try:
                chunk = ray.get(task.actor.read_log.remote(
                    task.launch_id, task.offset, LOG_CHUNK), timeout=10)
            except ray.exceptions.RayError:
                return
            if chunk:
                _append(task, chunk)
            if len(chunk) < LOG_CHUNK:
                return


def pull_all(ray: Any, running: list[Task]) -> None:
    """One round of pulls for the tasks running, asked of their agents all at once."""
    asks = []
    for t in running:
        try:
            asks.append((t, t.offset,
                         t.actor.read_log.remote(t.launch_id, t.offset, LOG_CHUNK)))
        except ray.exceptions.RayError:
            continue
    if not asks:
        return
    ray.wait([a[2] for a in asks], num_returns=len(asks), timeout=2)
    for task, offset, ref in asks:
        try:
            chunk = ray.get(ref, timeout=0)
        except ray.exceptions.RayError:
            continue
        with task.lock:
            if chunk and task.offset == offset:  # not pulled meanwhile by `pull`
                _append(task, chunk)


def _append(task: Task, chunk: bytes) -> None:
    try:
        files.append_server_file(task.log_path, chunk)
    except beneath.Refused as exc:
        # A task put a link (or a file, or a folder of its user's) where its log goes: its
        # output goes nowhere rather than through it.
        if not task.log_refused:
            log.warning("the output of %s is not kept: %s", task.launch_id, exc)
            task.log_refused = True
    task.offset += len(chunk)
