"""Files on the local disk: per-attempt code snapshots, task logs, and the run directory.

Layout under `$CORRAL_HOME/runs/<job id>/attempt-<n>/`: `code/` (the snapshot the attempt
runs), `logs/<task>.log` (stdout and stderr), `metrics/<task>.jsonl` (the metrics a task
reports), `ctl/` (the executor's claim files). `$CORRAL_HOME/runs/.ready/` holds run
directories made ahead of time (see `ReadyDirs`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import pathlib
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Callable

from corral.domain import errors

log = logging.getLogger(__name__)

SNAPSHOT_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".git", ".mypy_cache",
                                         ".pytest_cache")
REMOTE_SCHEMES = ("s3://", "obs://", "http://", "https://", "gs://")


@dataclasses.dataclass(frozen=True)
class RunPaths:
    runs_dir: pathlib.Path
    job_id: str

    @property
    def job_dir(self) -> pathlib.Path:
        return self.runs_dir / self.job_id

    def attempt_dir(self, attempt: int) -> pathlib.Path:
        return self.job_dir / f"attempt-{attempt}"

    def code_dir(self, attempt: int) -> pathlib.Path:
        return self.attempt_dir(attempt) / "code"

    def log_path(self, attempt: int, task: str) -> pathlib.Path:
        return self.attempt_dir(attempt) / "logs" / f"{task}.log"

    def metrics_path(self, attempt: int, task: str) -> pathlib.Path:
        """The file a task appends its training metrics to (CORRAL_METRICS_FILE)."""
        return self.attempt_dir(attempt) / "metrics" / f"{task}.jsonl"

    def control_dir(self, attempt: int) -> pathlib.Path:
        return self.attempt_dir(attempt) / "ctl"

    def make_attempt_dirs(self, attempt: int, ready: ReadyDirs | None = None) -> None:
        """The attempt's directory with its `logs/`, `metrics/` and `ctl/`: for a job's
        first attempt, one of the `ready` ones moved into place when there is one.

        Otherwise one mkdir each, parents first: creating a directory is among the dearer
        system calls on some disks (up to a millisecond each on the machine the benchmarks
        ran on), and `mkdir(parents=True)` on a new path first fails once per missing
        parent.
        """
        if attempt == 1 and ready is not None and ready.take(self.job_dir):
            return
        att = str(self.attempt_dir(attempt))
        for path in (str(self.job_dir), att, f"{att}/logs", f"{att}/metrics", f"{att}/ctl"):
            try:
                os.mkdir(path)
            except FileExistsError:
                pass
            except FileNotFoundError:  # the runs directory itself is gone
                os.makedirs(path, exist_ok=True)


#: where run directories made ahead of time wait, under the runs directory (not a job id)
READY_DIR = ".ready"
#: how many are kept made
READY_KEEP = 8
#: the task whose log a ready directory holds already: every job has it
FIRST_TASK = "worker-0"
#: how long after a start took one they are made again, while some are left
REFILL_DELAY_S = 0.02


class ReadyDirs:
    """Run directories made ahead of time, which a job's first attempt takes with a rename.

    Each directory or file made costs the file system a new inode, which on some disks
    costs up to a millisecond (on the machine the benchmarks ran on, for minutes after many
    files were deleted, against tens of microseconds otherwise), and a job's start needs
    seven of them on its way: its directory, its attempt's, `logs/`, `metrics/`, `ctl/`,
    the first task's log and the launch's claim. A rename needs none. A thread of its own
    keeps `keep` of them made under `runs/.ready/` (the first attempt's skeleton, with an
    empty log for worker-0), so that a start takes one in a single rename and only the
    claim is new. When none is ready, or the job's directory exists already with
    something in it, the caller makes the directories itself.

    One is made under a `tmp-` name and renamed once complete, so that a server killed
    half way leaves nothing that is taken; the next start adopts the complete ones and
    removes the rest.
    """

    def __init__(self, runs_dir: pathlib.Path, keep: int = READY_KEEP) -> None:
        self.root = runs_dir / READY_DIR
        self.keep = keep
        self._names: list[str] = []
        self._lock = threading.Lock()
        self._wanted = threading.Event()
        self._closed = False
        self._adopted = False
        self._thread: threading.Thread | None = None

    def take(self, job_dir: pathlib.Path) -> bool:
        """Move a ready run directory to `job_dir`, which must not exist (or be empty);
        False when none is ready or the move failed: the caller makes the directories."""
        with self._lock:
            if self._thread is None and not self._closed:  # the first start: fill
                self._thread = threading.Thread(target=self._run, name="corral-ready-dirs",
                                                daemon=True)
                self._thread.start()
            name = self._names.pop() if self._names else None
        if name is not None:
            try:
                os.rename(self.root / name, job_dir)
            except OSError:  # the job's directory has something in it already (or is gone)
                if (self.root / name).is_dir():
                    with self._lock:
                        self._names.append(name)
                return False
        self._wanted.set()  # one more, or the first ones
        return name is not None

    def ready(self) -> int:
        """How many are ready now."""
        with self._lock:
            return len(self._names)

    def fill(self) -> None:
        """Make ready directories until `keep` are (the thread's work; callable directly).
        The first time, the complete ones a server before this one left are taken in and
        half-made ones removed."""
        if not self._adopted:
            self._adopt()
            self._adopted = True
        while not self._closed and self.ready() < self.keep:
            name = uuid.uuid4().hex
            tmp = RunPaths(self.root, f"tmp-{name}")
            tmp.make_attempt_dirs(1)
            tmp.log_path(1, FIRST_TASK).touch()
            os.rename(tmp.job_dir, self.root / name)
            with self._lock:
                self._names.append(name)

    def close(self) -> None:
        """Stop making them; those made stay for the next start."""
        self._closed = True
        self._wanted.set()

    def _adopt(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        found = []
        for entry in os.scandir(self.root):
            if entry.name.startswith("tmp-"):
                shutil.rmtree(entry.path, ignore_errors=True)
            elif entry.is_dir():
                found.append(entry.name)
        with self._lock:
            self._names += [name for name in found if name not in self._names]

    def _run(self) -> None:
        while not self._closed:
            self._wanted.wait()
            if self.ready():  # not while the start that took one makes its own files
                time.sleep(REFILL_DELAY_S)
            self._wanted.clear()
            if self._closed:
                return
            try:
                self.fill()
            except OSError as exc:  # a full or read-only disk: starts make their own
                log.warning("cannot make run directories ahead: %s", exc)


def local_path(url: str, what: str) -> pathlib.Path:
    """A channel or code URL as a local absolute path, or a clear refusal."""
    if url.startswith(REMOTE_SCHEMES):
        raise errors.BadParameter(
            f"{what} '{url}': only s3:// and obs:// object storage URLs are supported here")
    raw = url.removeprefix("file://")
    if not os.path.isabs(raw):
        raise errors.BadParameter(f"{what} '{url}' must be an absolute path")
    return pathlib.Path(os.path.normpath(raw))


def resolve_boot_file(code_dir: pathlib.Path, boot_file: str) -> pathlib.Path:
    """The boot file inside `code_dir` (absolute and inside it, or relative to it)."""
    raw = boot_file.removeprefix("file://")
    path = pathlib.Path(os.path.normpath(code_dir / raw))
    if not path.is_relative_to(code_dir):
        raise errors.BadParameter(
            f"algorithm.boot_file '{boot_file}' is not inside code_dir '{code_dir}'")
    return path


def snapshot(src: pathlib.Path, dest: pathlib.Path,
             cancelled: Callable[[], bool] | None = None) -> None:
    """Copy the code directory so later edits to it do not reach a running attempt.

    The copy is made beside `dest` and renamed into place, so an existing `dest` is always
    complete (a relaunch after a crash reuses it) and a half-made one is never used; one
    left by a server that died while copying is removed first (an attempt is prepared by
    one server at a time). `cancelled` is asked before each file: once it says yes, the
    copy stops, is removed, and LaunchError is raised.
    """
    if dest.exists():
        return
    dest.parent.mkdir(parents=True, exist_ok=True)
    for stale in dest.parent.glob(f".{dest.name}.tmp-*"):
        shutil.rmtree(stale, ignore_errors=True)
    tmp = dest.with_name(f".{dest.name}.tmp-{os.getpid()}")

    def copy(s: str, d: str) -> object:
        if cancelled is not None and cancelled():
            raise _Cancelled
        return shutil.copy2(s, d)

    try:
        shutil.copytree(src, tmp, symlinks=True, ignore=SNAPSHOT_IGNORE, copy_function=copy)
    except _Cancelled:
        shutil.rmtree(tmp, ignore_errors=True)
        raise errors.LaunchError(f"copying code_dir '{src}' was cancelled") from None
    except (OSError, shutil.Error) as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise errors.LaunchError(f"cannot snapshot code_dir '{src}': {exc}") from None
    os.rename(tmp, dest)
    write_code_manifest(src, dest)


class _Cancelled(Exception):
    """Raised inside copytree to stop a snapshot nobody wants any more."""


#: beside each attempt's `code/`: what it ran (content hash, git commit of the source)
CODE_MANIFEST = "code.json"


def write_code_manifest(src: pathlib.Path, snapshot_dir: pathlib.Path) -> dict[str, str | None]:
    manifest = {"code_hash": tree_hash(snapshot_dir), "git_commit": git_commit(src)}
    (snapshot_dir.parent / CODE_MANIFEST).write_text(json.dumps(manifest))
    return manifest


def read_code_manifest(attempt_dir: pathlib.Path) -> dict[str, str | None] | None:
    try:
        return dict(json.loads((attempt_dir / CODE_MANIFEST).read_text()))
    except (OSError, ValueError):
        return None


def tree_hash(root: pathlib.Path) -> str:
    """`sha256:<hex>` over the relative paths, kinds and contents of every file in `root`.

    Names and bytes only (no times, no permissions but the executable bit), so the same
    code copied anywhere hashes the same.
    """
    h = hashlib.sha256()
    for path in sorted(root.rglob("*"), key=lambda p: p.relative_to(root).as_posix()):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            h.update(f"L {rel} -> {os.readlink(path)}\0".encode())
        elif path.is_file():
            mode = "x" if os.access(path, os.X_OK) else "f"
            h.update(f"{mode} {rel} {path.stat().st_size}\0".encode())
            with path.open("rb") as fh:
                while chunk := fh.read(1 << 20):
                    h.update(chunk)
    return "sha256:" + h.hexdigest()


def git_commit(src: pathlib.Path) -> str | None:
    """The commit checked out where `src` lies in a git work tree (`-dirty` when it has
    uncommitted changes), or None when it is in none or git is not installed."""
    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", "-C", str(src), *args], capture_output=True,
                                 text=True, timeout=10, env={**os.environ, "LC_ALL": "C"})
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    commit = git("rev-parse", "--verify", "HEAD")
    if not commit:
        return None
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", ".")
    return f"{commit}-dirty" if dirty else commit


def tail(path: pathlib.Path, max_bytes: int) -> tuple[bytes, int]:
    """The last `max_bytes` of a file, read from the end, and the file's full size."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            start = max(0, size - max_bytes)
            fh.seek(start)
            data = fh.read(size - start)
    except FileNotFoundError:
        return b"", 0
    if start:
        data = _from_char_start(data)
    return data, size


def read_from(path: pathlib.Path, offset: int, max_bytes: int) -> tuple[bytes, int, int]:
    """(bytes from `offset`, the offset after them, the file size); ends on a whole char."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            if offset >= size:
                return b"", min(offset, size), size
            fh.seek(offset)
            data = fh.read(min(max_bytes, size - offset))
    except FileNotFoundError:
        return b"", 0, 0
    data = _to_char_end(data)
    return data, offset + len(data), size


def _from_char_start(data: bytes) -> bytes:
    # Skip UTF-8 continuation bytes so the text does not start mid-character.
    i = 0
    while i < min(4, len(data)) and (data[i] & 0xC0) == 0x80:
        i += 1
    return data[i:]


def _to_char_end(data: bytes) -> bytes:
    # Hold back an incomplete trailing UTF-8 sequence for the next read.
    for back in range(1, min(4, len(data)) + 1):
        b = data[-back]
        if b & 0x80 == 0:
            return data
        if b & 0xC0 == 0xC0:
            need = 2 if b >= 0xC0 and b < 0xE0 else 3 if b < 0xF0 else 4
            return data if back >= need else data[:-back]
    return data


def export_logs(paths: RunPaths, attempt: int, dest: pathlib.Path) -> None:
    """Copy an ended attempt's task logs to the job's log_export_path (kept after delete)."""
    src = paths.attempt_dir(attempt) / "logs"
    if not src.is_dir():
        return
    target = dest / f"attempt-{attempt}"
    target.mkdir(parents=True, exist_ok=True)
    for log in src.glob("*.log"):
        shutil.copy2(log, target / log.name)


def remove_job_dir(paths: RunPaths) -> None:
    shutil.rmtree(paths.job_dir, ignore_errors=True)


#: the file a run directory holds once its job's rows are being purged: its removal is due
#: (see `marked_purged`)
PURGED_MARK = ".purged"


def mark_purged(paths: RunPaths) -> None:
    """Say in a job's run directory, before its rows are purged, that the directory is to
    go: a server killed after the purge committed but before the directory was removed
    finds it on its next start, with nothing else left to tell whose it was."""
    with contextlib.suppress(FileNotFoundError):  # no directory: nothing to leave behind
        (paths.job_dir / PURGED_MARK).touch()


def marked_purged(runs_dir: pathlib.Path) -> list[str]:
    """The job ids whose run directories say their rows were being purged. Only those: a
    directory the database does not know without the mark may be another database's."""
    try:
        entries = list(os.scandir(runs_dir))
    except FileNotFoundError:
        return []
    return [e.name for e in entries if not e.name.startswith(".")
            and os.path.exists(os.path.join(e.path, PURGED_MARK))]
