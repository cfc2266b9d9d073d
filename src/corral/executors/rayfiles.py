"""Copying what a task on a Ray node writes back to where its job's channels say.

A task on a Ray node writes its output channels and its metrics file into a scratch
directory of its own there (`rayactor`). The server needs them where the job says: an
output channel's folder (or the local folder an object-storage channel is uploaded from,
which the storage component uploads), and the metrics file where reported metrics are read.
Every few seconds while the task runs, and once more when it has ended (before it counts
as ended, so that a model is registered from complete files), new and changed files are
copied: output files whole (made beside and renamed into place), the metrics file by
appending what was added since.

Where a launch's files go is written beside its control files when it is launched (its
plan, with the placement group it was given and the inputs shipped to it), so a restarted
server goes on copying them for the tasks it adopts.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import json
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Callable
from typing import Any

from corral.domain import metrics
from corral.executors import base

log = logging.getLogger(__name__)
#: bytes per read from an agent
CHUNK = 1 << 20
#: seconds between copies of running tasks' files
INTERVAL = 2.0


@dataclasses.dataclass
class Outputs:
    """Where one launch's files go on the server, and what of them was copied."""

    dirs: list[str]  #: the output channels' folders, by channel index
    metrics: str  #: the metrics file ("" when none)
    scratch: str  #: where partial copies are made (the launch's control dir)
    metrics_offset: int = 0
    seen: dict[tuple[int, str], tuple[int, int]] = dataclasses.field(default_factory=dict)
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)


class Copier:
    """Copies running tasks' files every INTERVAL, and an ended task's last files as soon
    as it is known to have ended (`done`), then wakes the scheduler.

    A task here is the executor's record of it: its actor, launch id, log path, pending
    `wait` (its exit code), its `Outputs`, and the flags `collecting` and `collected`."""

    def __init__(self, ray: Any, running: Callable[[], list[Any]],
                 wake: Callable[[], None]) -> None:
        self._ray = ray
        self._running = running
        self._wake = wake
        self._pool = concurrent.futures.ThreadPoolExecutor(
            4, thread_name_prefix="corral-ray-files")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="corral-ray-copy",
                                        daemon=True)
        self._thread.start()

    def done(self, task: Any) -> bool:
        """Whether an ended task's last files are here; starts copying them if not."""
        with task.lock:
            if task.collected:
                return True
            start, task.collecting = not task.collecting, True
        if start:
            try:
                self._pool.submit(self._last, task)
            except RuntimeError:  # closing
                task.collected = True
                return True
        return False

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _last(self, task: Any) -> None:
        ray = self._ray
        try:
            ray.get(task.wait_ref, timeout=10)  # it ended by itself, not with its node
            if task.outputs is not None:
                sync(ray, task.actor, task.launch_id, task.outputs)
        except (ray.exceptions.RayError, AttributeError):
            pass  # the agent is gone: what is said about the task says why
        except (OSError, ValueError) as exc:
            with contextlib.suppress(OSError), open(task.log_path, "ab") as fh:
                fh.write(f"corral: could not copy the task's files back: {exc}\n".encode())
        finally:
            task.collected = True
            self._wake()

    def _loop(self) -> None:
        while not self._stop.wait(INTERVAL):
            for t in self._running():
                if self._stop.is_set():
                    return
                if t.collecting or t.outputs is None:
                    continue
                try:
                    sync(self._ray, t.actor, t.launch_id, t.outputs)
                except (self._ray.exceptions.RayError, AttributeError):
                    pass  # the agent is busy or gone: the next pass, or the end, will tell
                except (OSError, ValueError) as exc:
                    log.warning("copying the files of %s back failed: %s", t.launch_id, exc)


def record(spec: base.LaunchSpec, **more: Any) -> Outputs:
    """Write down where the launch's files go (and `more` about it), beside its control
    files."""
    out = Outputs(dirs=list(spec.output_dirs), metrics=spec.env.get(metrics.FILE_ENV, ""),
                  scratch=spec.control_dir)
    os.makedirs(spec.control_dir, exist_ok=True)
    with open(_plan_path(spec.control_dir, spec.task, spec.launch_id), "w") as fh:
        json.dump({"outputs": out.dirs, "metrics": out.metrics, **more}, fh)
    return out


def plan(control_dir: str, task: str, launch_id: str) -> dict[str, Any]:
    """What `record` wrote about a launch ({} when nothing was: it never got that far)."""
    try:
        with open(_plan_path(control_dir, task, launch_id)) as fh:
            found = json.load(fh)
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def load(handle: base.Handle) -> Outputs:
    """Where an adopted launch's files go; its metrics go on from what is already here."""
    found = plan(handle.control_dir, handle.task, handle.launch_id)
    out = Outputs(dirs=list(found.get("outputs", [])), metrics=str(found.get("metrics", "")),
                  scratch=handle.control_dir)
    with contextlib.suppress(OSError):
        out.metrics_offset = os.path.getsize(out.metrics) if out.metrics else 0
    return out


def sync(ray: Any, actor: Any, launch_id: str, out: Outputs) -> int:
    """Copy what changed on the node since the last copy; returns the files copied.

    Raises what Ray raises when the agent cannot be asked."""
    with out.lock:
        listing = ray.get(actor.listing.remote(launch_id), timeout=30)
        if out.metrics and listing["metrics"] > out.metrics_offset:
            _append_metrics(ray, actor, launch_id, out, int(listing["metrics"]))
        copied = 0
        for channel, rel, size, mtime in listing["files"]:
            if channel >= len(out.dirs) or out.seen.get((channel, rel)) == (size, mtime):
                continue
            dest = _inside(out.dirs[channel], rel)
            if _copy(ray, actor, launch_id, (channel, rel, size), dest, out.scratch):
                copied += 1
            out.seen[(channel, rel)] = (size, mtime)
        return copied


def _append_metrics(ray: Any, actor: Any, launch_id: str, out: Outputs, size: int) -> None:
    os.makedirs(os.path.dirname(out.metrics), exist_ok=True)
    with open(out.metrics, "ab") as fh:
        while out.metrics_offset < size:
            chunk = ray.get(actor.read_file.remote(launch_id, -1, "", out.metrics_offset,
                                                   CHUNK), timeout=60)
            if not chunk:
                return
            fh.write(chunk)
            fh.flush()
            out.metrics_offset += len(chunk)


def _copy(ray: Any, actor: Any, launch_id: str, what: tuple[int, str, int], dest: str,
          scratch: str) -> bool:
    """Copy one file whole; False when it went away on the node meanwhile."""
    channel, rel, size = what
    fd, tmp = tempfile.mkstemp(dir=scratch, prefix=".copy-")
    try:
        with os.fdopen(fd, "wb") as fh:
            offset = 0
            while True:
                chunk = ray.get(actor.read_file.remote(launch_id, channel, rel, offset, CHUNK),
                                timeout=60)
                fh.write(chunk)
                offset += len(chunk)
                if len(chunk) < CHUNK:
                    break
        if offset == 0 and size > 0:
            return False
        os.chmod(tmp, 0o644)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        try:
            os.replace(tmp, dest)
        except OSError:  # another file system: copied instead of renamed
            shutil.copyfile(tmp, dest)
        return True
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def _inside(top: str, rel: str) -> str:
    """`rel` under `top`, refused when it would lead out of it."""
    dest = os.path.normpath(os.path.join(top, rel))
    if not dest.startswith(os.path.normpath(top) + os.sep):
        raise ValueError(f"{rel!r} is not inside {top}")
    return dest


def _plan_path(control_dir: str, task: str, launch_id: str) -> str:
    return os.path.join(control_dir, f"{task}.{launch_id}.outputs.json")
