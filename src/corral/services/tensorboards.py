"""TensorBoard over a training job's summary folder (`tensorboard/enable: true`).

A job that asks for it names the folder (`algorithm.summary`, log_type tensorboard, in one
of its output channels); it is checked at submit, and refused in words where it cannot be
served: no such summary, or no TensorBoard installed beside the server.

Nothing runs until someone opens it: the first request through the proxy
(api/tensorboard_proxy.py) starts a TensorBoard over that folder, on this server, as the
user the jobs' tasks run as (`run_as` when the server is root; it reads what a job could),
and it is stopped once nobody has asked it anything for `tensorboard_idle` seconds, when
its job is deleted, or for a new one when `tensorboard_max` run. It reads the folder as
it is on this server, while the job runs and after it has ended: on a Ray pool, the copy
that comes back from the node every few seconds (docs/ray.md).
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import logging
import os
import pathlib
import secrets
import threading
import time

from corral import settings as settings_mod
from corral.domain import errors, jobfields, specs
from corral.executors.local import tensorboard
from corral.services import jobpaths
from corral.store import db, job_repo, rows

log = logging.getLogger(__name__)
#: where the proxy serves a job's TensorBoard, on the notebooks' origin
PATH = "/training-jobs/{job_id}/tensorboard"
#: seconds a TensorBoard that ended by itself is not started again (it would only end again)
RETRY_S = 10.0


class Unavailable(errors.CorralError):
    """The job's TensorBoard is not running."""


def installed() -> bool:
    """Whether TensorBoard can be run by the server's Python."""
    return importlib.util.find_spec("tensorboard") is not None


def check(body: specs.JobCreate) -> None:
    """BadParameter when the job asks for TensorBoard and cannot have it."""
    if not jobfields.wants_tensorboard(body.metadata.annotations):
        return
    try:
        jobfields.check_tensorboard(body.algorithm.summary)
    except ValueError as exc:
        raise errors.BadParameter(str(exc)) from None
    if not installed():
        raise errors.BadParameter(
            f"{jobfields.TENSORBOARD}: TensorBoard is not installed beside corral's server "
            "(pip install 'corral[tensorboard]'); or leave the annotation out and run "
            "TensorBoard over CORRAL_SUMMARY_DIR's folder yourself")


def logdir(job: rows.Job) -> str | None:
    """The folder a job's TensorBoard shows, on this server; None when the job did not
    ask for one."""
    spec = job_repo.job_spec(job)
    if not jobfields.wants_tensorboard(spec.metadata.annotations):
        return None
    return spec.algorithm.summary_dir()


def url_path(job_id: str) -> str:
    return PATH.format(job_id=job_id) + "/"


@dataclasses.dataclass
class Board:
    """A job's running TensorBoard, and its use."""

    process: tensorboard.Process
    started: float
    used: float  #: when a request to it last began or ended
    busy: int = 0  #: requests to it under way (it is not idle while one is)

    @property
    def sock(self) -> pathlib.Path:
        return self.process.sock


class Boards:
    """The TensorBoards this server runs, by job id."""

    def __init__(self, settings: settings_mod.Settings, store: db.Store) -> None:
        self.settings = settings
        self.store = store
        self.folder = settings.home / "tensorboard"
        self._boards: dict[str, Board] = {}
        #: job id -> (until when it is not started again, why it ended)
        self._failed: dict[str, tuple[float, str]] = {}
        self._lock = threading.Lock()
        self._sweeper: threading.Thread | None = None
        self._closed = threading.Event()
        self._prepared = False

    def open(self, job_id: str, folder: str) -> Board:
        """The job's TensorBoard over `folder`, started if none runs, with one more request
        under way (`done` ends it). Unavailable when it ended by itself a moment ago."""
        if not installed():
            raise Unavailable("TensorBoard is not installed beside this server "
                              "(pip install 'corral[tensorboard]')")
        now = time.monotonic()
        with self._lock:
            board = self._boards.get(job_id)
            if board is not None and not board.process.alive():
                self._ended(job_id, board, now)
                board = None
            if board is None:
                failed = self._failed.get(job_id)
                if failed is not None and failed[0] > now:
                    raise Unavailable(f"the job's TensorBoard ended: {failed[1]}")
                self._make_room()
                self._boards[job_id] = board = self._start(job_id, folder, now)
                self._sweep_soon()
            board.used = now
            board.busy += 1
            return board

    def done(self, board: Board) -> None:
        """A request to `board` (from `open`) has ended."""
        with self._lock:
            board.busy -= 1
            board.used = time.monotonic()

    def running(self) -> list[str]:
        """The jobs whose TensorBoard runs."""
        with self._lock:
            return [j for j, b in self._boards.items() if b.process.alive()]

    def close(self) -> None:
        """Stop them all (the server stops)."""
        self._closed.set()
        with self._lock:
            boards, self._boards = list(self._boards.values()), {}
        for board in boards:
            tensorboard.stop(board.process)

    def sweep(self) -> None:
        """Stop those idle for `tensorboard_idle` seconds, and those of deleted jobs."""
        now = time.monotonic()
        with self._lock:
            ids = list(self._boards)
        gone = self._gone(ids) if ids else set()
        stopping: list[Board] = []
        with self._lock:
            for job_id, board in list(self._boards.items()):
                if not board.process.alive():
                    self._ended(job_id, board, now)
                elif job_id in gone or (not board.busy and now - board.used
                                        > self.settings.tensorboard_idle):
                    stopping.append(self._boards.pop(job_id))
                    log.info("tensorboard of job %s: stopped (%s)", job_id,
                             "job deleted" if job_id in gone else "idle")
        for board in stopping:
            tensorboard.stop(board.process)

    def _start(self, job_id: str, folder: str, now: float) -> Board:
        if not self._prepared:  # (what an earlier server left there goes)
            tensorboard.prepare(self.folder, clean=True)
            self._prepared = True
        # A name of its own: an older one of the job's, being stopped, removes only its own.
        name = f"{hashlib.sha256(job_id.encode()).hexdigest()[:16]}-{secrets.token_hex(4)}"
        try:
            process = tensorboard.start(self.folder, name, logdir=folder,
                                        prefix=PATH.format(job_id=job_id), user=self._user())
        except (OSError, errors.CorralError) as exc:
            raise Unavailable(f"the job's TensorBoard could not start: {exc}") from None
        log.info("tensorboard of job %s: started over %s (pid %d)", job_id, folder,
                 process.proc.pid)
        return Board(process=process, started=now, used=now)

    def _ended(self, job_id: str, board: Board, now: float) -> None:
        """Forget a board whose process ended by itself; one that ended soon after its start
        is not started again for RETRY_S."""
        del self._boards[job_id]
        said = board.process.tail() or f"exit code {board.process.proc.returncode}"
        tensorboard.stop(board.process)
        log.warning("tensorboard of job %s ended: %s", job_id, said)
        self._failed = {j: f for j, f in self._failed.items() if f[0] > now}
        if now - board.started < RETRY_S:
            self._failed[job_id] = (now + RETRY_S, said[-500:])

    def _make_room(self) -> None:
        """Stop the least recently used while `tensorboard_max` run."""
        while len(self._boards) >= self.settings.tensorboard_max:
            oldest = min(self._boards, key=lambda j: (self._boards[j].busy > 0,
                                                      self._boards[j].used))
            tensorboard.stop(self._boards.pop(oldest).process)

    def _user(self) -> tuple[int, int] | None:
        """Who TensorBoard runs as: the jobs' task user where the server is root (root
        itself when no run_as is set, as jobs do), else the server's own user."""
        if os.geteuid() != 0:
            return None
        return jobpaths.task_user(self.settings, quiet=True)

    def _gone(self, job_ids: list[str]) -> set[str]:
        with self.store.read() as conn:
            found = {j: job_repo.job_by_id(conn, j) for j in job_ids}
        return {j for j, row in found.items() if row is None or row.deleted_at is not None}

    def _sweep_soon(self) -> None:
        """Start the thread that sweeps while boards run (the lock is held)."""
        if self._sweeper is not None and self._sweeper.is_alive():
            return
        self._sweeper = threading.Thread(target=self._sweep_while_running,
                                         name="corral-tensorboards", daemon=True)
        self._sweeper.start()

    def _sweep_while_running(self) -> None:
        interval = min(5.0, max(0.05, self.settings.tensorboard_idle / 4))
        while not self._closed.wait(interval):
            try:
                self.sweep()
            except Exception:
                log.exception("the tensorboards' sweep failed")
            with self._lock:
                if not self._boards:
                    self._sweeper = None
                    return
