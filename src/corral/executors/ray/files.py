"""Copying what a task on a Ray node writes back to where its job's channels say.

A task on a Ray node writes its output channels and its metrics file into a scratch
directory of its own there (`actor`). The server needs them where the job says: an
output channel's folder (or the local folder an object-storage channel is uploaded from,
which the storage component uploads), and the metrics file where reported metrics are read.
Every few seconds while the task runs, and once more when it has ended (before it counts
as ended, so that a model is registered from complete files), new and changed files are
copied: output files whole (made beside and renamed into place), the metrics file by
appending what was added since.

The same pass sends a running task's node what changed in the inputs it follows
(`follow`), the other way.

Where a launch's files go is written beside its control files when it is launched (its
plan, with the placement group it was given and the inputs shipped to it), so a restarted
server goes on copying them for the tasks it adopts.

The server writes these as its own user (root, with `run_as`) into folders the job's user
owns (the attempt's, its `metrics/`, the output channels), where a task may have put a
link: every file here is opened one component at a time from its real path, refusing a
link (`beneath`), and copied files are written beside their name and renamed into it.
The output channels' real paths are taken when the launch is recorded.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import errno
import json
import logging
import os
import secrets
import threading
from collections.abc import Callable
from typing import Any

from corral.domain import metrics
from corral.executors import base
from corral.oskit import beneath

log = logging.getLogger(__name__)
#: bytes per read from an agent
CHUNK = 1 << 20
#: seconds between copies of running tasks' files
INTERVAL = 2.0
#: how many times an ended task's last files are asked for from an agent Ray calls
#: unavailable for a moment, INTERVAL apart
LAST_TRIES = 3


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
            try:
                ray.get(task.wait_ref, timeout=10)  # it ended by itself, not with its node
            except (ray.exceptions.RayError, AttributeError):
                return  # the agent is gone: what is said about the task says why
            if task.outputs is not None:
                self._sync_last(task)
        finally:
            task.collected = True
            self._wake()

    def _sync_last(self, task: Any) -> None:
        """Copy an ended task's last files back. When its agent cannot be asked for them
        (its node left), `task.files_left` says why: the task must not count as having
        ended well without them."""
        ray, out = self._ray, task.outputs
        for attempt in range(1, LAST_TRIES + 1):
            try:
                sync(ray, task.actor, task.launch_id, out)
                return
            except (ray.exceptions.RayError, AttributeError) as exc:
                hiccup = isinstance(exc, ray.exceptions.ActorUnavailableError)
                if hiccup and attempt < LAST_TRIES:  # ask again
                    self._stop.wait(INTERVAL)
                    continue
                if out.dirs or out.metrics:
                    task.files_left = _first_line(exc)
                return
            except (OSError, ValueError) as exc:
                with contextlib.suppress(OSError):
                    append_server_file(task.log_path, (
                        f"corral: could not copy the task's files back: {exc}\n").encode())
                return

    def _loop(self) -> None:
        while not self._stop.wait(INTERVAL):
            for t in self._running():
                if self._stop.is_set():
                    return
                if t.collecting or t.outputs is None:
                    continue
                try:
                    sync(self._ray, t.actor, t.launch_id, t.outputs)
                    if t.followed is not None and t.followed.ready:
                        t.followed.push()  # (what it follows, the other way)
                except (self._ray.exceptions.RayError, AttributeError):
                    pass  # the agent is busy or gone: the next pass, or the end, will tell
                except (OSError, ValueError) as exc:
                    log.warning("copying the files of %s failed: %s", t.launch_id, exc)


def _first_line(exc: BaseException) -> str:
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return lines[0] if lines else type(exc).__name__


def record(spec: base.LaunchSpec, **more: Any) -> Outputs:
    """Write down where the launch's files go (and `more` about it), beside its control
    files."""
    out = Outputs(dirs=[os.path.realpath(d) for d in spec.output_dirs],
                  metrics=spec.env.get(metrics.FILE_ENV, ""), scratch=spec.control_dir)
    me = os.geteuid()
    ctl = beneath.open_dir(spec.control_dir, make=True, owner=me)
    try:
        fd = beneath.open_at(ctl, os.path.basename(_plan_path(spec.control_dir, spec.task,
                                                              spec.launch_id)),
                             os.O_WRONLY | os.O_CREAT | os.O_TRUNC, owner=me)
    finally:
        os.close(ctl)
    with os.fdopen(fd, "w") as fh:
        json.dump({"outputs": out.dirs, "metrics": out.metrics, **more}, fh)
    return out


def plan(control_dir: str, task: str, launch_id: str) -> dict[str, Any]:
    """What `record` wrote about a launch ({} when nothing was: it never got that far, or
    what has its name is no plan of the server's)."""
    try:
        found = json.loads(beneath.read(_plan_path(control_dir, task, launch_id),
                                        owner=os.geteuid())[0])
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def make_server_dir(path: str) -> None:
    """Make (when missing) a folder of the server's in an attempt's folder, such as its
    `logs/`: reached through no link, and the server's."""
    os.close(beneath.open_dir(path, make=True, owner=os.geteuid()))


def append_server_file(path: str, data: bytes) -> None:
    """Append to a file of the server's in an attempt's folder (a task's log), made when
    missing: the file and its folder reached through no link, and the server's."""
    fd = beneath.open_file(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, make=True,
                           owner=os.geteuid())
    try:
        beneath.write_all(fd, data)
    finally:
        os.close(fd)


def _metrics_file(path: str, flags: int) -> int:
    """The server's copy of a task's metrics file, in the attempt's `metrics/` (the job's
    user's: tasks on this machine append there): no link on the way, and the file the
    server's."""
    parent = beneath.open_dir(os.path.dirname(path), make=True)
    try:
        return beneath.open_at(parent, os.path.basename(path), flags, owner=os.geteuid(),
                               shown=path)
    finally:
        os.close(parent)


def load(handle: base.Handle) -> Outputs:
    """Where an adopted launch's files go; its metrics go on from what is already here."""
    found = plan(handle.control_dir, handle.task, handle.launch_id)
    out = Outputs(dirs=list(found.get("outputs", [])), metrics=str(found.get("metrics", "")),
                  scratch=handle.control_dir)
    with contextlib.suppress(OSError):
        if out.metrics:
            fd = _metrics_file(out.metrics, os.O_RDONLY)
            out.metrics_offset = os.fstat(fd).st_size
            os.close(fd)
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
    fd = _metrics_file(out.metrics, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        while out.metrics_offset < size:
            chunk = ray.get(actor.read_file.remote(launch_id, -1, "", out.metrics_offset,
                                                   CHUNK), timeout=60)
            if not chunk:
                return
            beneath.write_all(fd, chunk)
            out.metrics_offset += len(chunk)
    finally:
        os.close(fd)


def _copy(ray: Any, actor: Any, launch_id: str, what: tuple[int, str, int], dest: str,
          scratch: str) -> bool:
    """Copy one file whole; False when it went away on the node meanwhile. It is made in
    the launch's control folder (the server's) and renamed into `dest`'s folder, opened
    without following a link: never written through what has its name."""
    channel, rel, size = what
    ctl = beneath.open_dir(scratch, owner=os.geteuid())
    tmp = f".copy-{secrets.token_hex(6)}"
    try:
        fd = beneath.open_at(ctl, tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, mode=0o600)
        try:
            offset = 0
            while True:
                chunk = ray.get(actor.read_file.remote(launch_id, channel, rel, offset, CHUNK),
                                timeout=60)
                beneath.write_all(fd, chunk)
                offset += len(chunk)
                if len(chunk) < CHUNK:
                    break
            if offset == 0 and size > 0:
                return False
            os.fchmod(fd, 0o644)
            _place(ctl, tmp, fd, dest)
            return True
        finally:
            os.close(fd)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=ctl)
        os.close(ctl)


def _place(ctl: int, tmp: str, fd: int, dest: str) -> None:
    """File `tmp` of folder `ctl` (open as `fd`) in the place of `dest`: renamed, or, on
    another file system, copied into a regular file with a single name there."""
    folder = beneath.open_dir(os.path.dirname(dest), make=True)
    name = os.path.basename(dest)
    try:
        try:
            os.rename(tmp, name, src_dir_fd=ctl, dst_dir_fd=folder)
            return
        except OSError as exc:
            if exc.errno != errno.EXDEV:
                raise
        out = beneath.open_at(folder, name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, shown=dest)
        try:
            os.lseek(fd, 0, os.SEEK_SET)
            while chunk := os.read(fd, CHUNK):
                beneath.write_all(out, chunk)
        finally:
            os.close(out)
    finally:
        os.close(folder)


def _inside(top: str, rel: str) -> str:
    """`rel` under `top`, refused when it would lead out of it."""
    dest = os.path.normpath(os.path.join(top, rel))
    if not dest.startswith(os.path.normpath(top) + os.sep):
        raise ValueError(f"{rel!r} is not inside {top}")
    return dest


def _plan_path(control_dir: str, task: str, launch_id: str) -> str:
    return os.path.join(control_dir, f"{task}.{launch_id}.outputs.json")
