"""Files on the local disk: per-attempt code snapshots, task logs, and the run directory.

Layout under `$CORRAL_HOME/runs/<job id>/attempt-<n>/`: `code/` (the snapshot the attempt
runs), `logs/<task>.log` (stdout and stderr), `metrics/<task>.jsonl` (the metrics a task
reports), `ctl/` (the executor's claim files).

`runs/<job id>/` is the server's; the attempt folder and what is in it belong to the user
the job runs as, whose processes may put links there. So every file here is opened
without following a link (see `oskit.beneath`); the runs directory is taken as its real
path, so that a link found below it is one a job planted.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import pathlib
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable, Sequence
from typing import Any, BinaryIO

from corral.domain import errors
from corral.oskit import beneath
from corral.storage import asuser

log = logging.getLogger(__name__)

#: what a code snapshot leaves out (shell patterns, matched against each name)
SNAPSHOT_IGNORE = ("__pycache__", "*.pyc", ".git", ".mypy_cache", ".pytest_cache")
REMOTE_SCHEMES = ("s3://", "obs://", "http://", "https://", "gs://")


@dataclasses.dataclass(frozen=True)
class RunPaths:
    runs_dir: pathlib.Path
    job_id: str

    def __post_init__(self) -> None:
        # Real, so that the paths below hold no link but one a job planted (refused).
        object.__setattr__(self, "runs_dir", pathlib.Path(os.path.realpath(self.runs_dir)))

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

    def make_attempt_dirs(self, attempt: int, owner: tuple[int, int] | None = None) -> None:
        """The attempt's directory with its `logs/`, `metrics/` and `ctl/`. With an
        `owner` (the user tasks run as), the attempt's directory and `metrics/` are theirs
        (tasks append their metrics there)."""
        att = self.attempt_dir(attempt)
        fd = beneath.open_dir(att, make=True)  # one walk from the root, not one per folder
        try:
            for sub in ("logs", "metrics", "ctl"):
                sub_fd = beneath.open_dir(sub, start=fd, shown=att / sub, make=True)
                try:
                    if owner is not None and sub == "metrics":
                        os.fchown(sub_fd, *owner)
                finally:
                    os.close(sub_fd)
            if owner is not None:
                os.fchown(fd, *owner)
        finally:
            os.close(fd)


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
             cancelled: Callable[[], bool] | None = None,
             owner: tuple[int, int] | None = None) -> None:
    """Copy the code directory so later edits to it do not reach a running attempt.

    `src` must be a real path (checked against the project's storage roots just before):
    the copy is made by a child process (see `asuser`) that refuses a link in it, and
    that runs as `owner` when given, so that it copies only what the job's user may read,
    and makes the snapshot theirs. It also hashes the copy and asks git for the commit of
    `src`, which running git as root in a folder a user controls would not be safe.

    The copy is made beside `dest` and renamed into place, so an existing `dest` is always
    complete (a relaunch after a crash reuses it) and a half-made one is never used; its
    manifest (`CODE_MANIFEST`) is written beside it first, so a snapshot in place always
    has one. A copy left by a server that died while copying is removed first (an attempt
    is prepared by one server, and one term of its scheduler, at a time:
    launches.Launches.close).
    `cancelled` is asked while the copy runs: once it says yes, the copy stops, is
    removed, and LaunchError is raised.
    """
    if is_real_dir(dest):
        return
    if os.path.lexists(dest):
        raise errors.LaunchError(f"'{dest}' is not the code snapshot corral made")
    if cancelled is not None and cancelled():
        raise errors.LaunchError(f"copying code_dir '{src}' was cancelled")
    for stale in dest.parent.glob(f".{dest.name}.tmp-*"):
        shutil.rmtree(stale, ignore_errors=True)  # (never follows a link)
    tmp = f".{dest.name}.tmp-{os.getpid()}"
    request = {"src": str(src), "attempt_dir": str(dest.parent), "tmp": tmp,
               "name": dest.name, "ignore": SNAPSHOT_IGNORE, "manifest": CODE_MANIFEST}
    try:
        _as_user("snapshot", request, owner, cancelled=cancelled)
    except _Cancelled:
        shutil.rmtree(dest.parent / tmp, ignore_errors=True)
        raise errors.LaunchError(f"copying code_dir '{src}' was cancelled") from None
    except OSError as exc:
        shutil.rmtree(dest.parent / tmp, ignore_errors=True)
        raise errors.LaunchError(f"cannot snapshot code_dir '{src}': {exc}") from None


class _Cancelled(Exception):
    """The work of a child process was stopped: nobody wants it any more."""


def is_real_dir(path: pathlib.Path) -> bool:
    """Whether `path` is a folder, not a link to one."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


#: the interval at which a child process's caller asks whether it is still wanted
CANCEL_POLL_S = 0.1


def _as_user(op: str, request: dict[str, Any], owner: tuple[int, int] | None, *,
             fds: Sequence[int] = (), cancelled: Callable[[], bool] | None = None,
             ) -> dict[str, Any]:
    """Run an `asuser` operation in a child process, as `owner` when given; its answer.

    OSError when it fails, _Cancelled when `cancelled` said yes meanwhile.
    """
    argv = [sys.executable, "-I", "-S", asuser.__file__, op]
    if owner is not None:
        argv += [str(owner[0]), str(owner[1])]
    # Only what git needs: the server's environment holds its secrets.
    env = {"PATH": os.environ.get("PATH", os.defpath), "LC_ALL": "C"}
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd="/", env=env, pass_fds=tuple(fds))
    pending: bytes | None = json.dumps(request).encode()
    while True:
        try:
            out, err = proc.communicate(
                pending, timeout=None if cancelled is None else CANCEL_POLL_S)
            break
        except subprocess.TimeoutExpired:
            pending = None
            if cancelled is not None and cancelled():
                proc.kill()
                proc.communicate()
                raise _Cancelled from None
    try:
        answer = dict(json.loads(out))
    except ValueError:
        said = err.decode(errors="replace").strip().splitlines()
        raise OSError(f"{op} ended with code {proc.returncode}"
                      + (f": {said[-1]}" if said else "")) from None
    if "error" in answer:
        raise OSError(answer["error"])
    return answer


#: beside each attempt's `code/`: what it ran (content hash, git commit of the source)
CODE_MANIFEST = "code.json"
#: a manifest is a few hundred bytes; more is not one corral wrote
MANIFEST_MAX = 64 * 1024


def read_code_manifest(attempt_dir: pathlib.Path) -> dict[str, str | None] | None:
    try:
        with open_run_file(attempt_dir / CODE_MANIFEST) as fh:
            return dict(json.loads(fh.read(MANIFEST_MAX)))
    except (OSError, ValueError, TypeError):
        return None


def open_run_file(path: pathlib.Path) -> BinaryIO:
    """A file of a run directory (a log, a metrics file) or of another path a job can
    write, opened for reading: no component of `path` may be a link, and the file must be
    a regular one with a single name (OSError otherwise: FileNotFoundError, or
    beneath.Refused for what a job planted). Cheap: a few system calls, no process."""
    return os.fdopen(beneath.open_file(path), "rb")


def _open_log(path: pathlib.Path) -> BinaryIO | None:
    """open_run_file, or None when there is no such file, or it is one a job planted."""
    try:
        return open_run_file(path)
    except FileNotFoundError:
        return None
    except beneath.Refused as exc:
        log.warning("not reading %s: %s", path, exc)
        return None


def tail(path: pathlib.Path, max_bytes: int) -> tuple[bytes, int]:
    """The last `max_bytes` of a file, read from the end, and the file's full size."""
    fh = _open_log(path)
    if fh is None:
        return b"", 0
    with fh:
        size = os.fstat(fh.fileno()).st_size
        start = max(0, size - max_bytes)
        fh.seek(start)
        data = fh.read(size - start)
    if start:
        data = _from_char_start(data)
    return data, size


def read_from(path: pathlib.Path, offset: int, max_bytes: int) -> tuple[bytes, int, int]:
    """(bytes from `offset`, the offset after them, the file size); ends on a whole char."""
    fh = _open_log(path)
    if fh is None:
        return b"", 0, 0
    with fh:
        size = os.fstat(fh.fileno()).st_size
        if offset >= size:
            return b"", min(offset, size), size
        fh.seek(offset)
        data = fh.read(min(max_bytes, size - offset))
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


def open_logs(paths: RunPaths, attempt: int) -> tuple[list[tuple[str, BinaryIO]], list[str]]:
    """An attempt's task logs, opened for reading without following a link: (file name,
    file) for each, and why any was left out (a job replaced it with a link or a hard
    link). The caller closes the files. Nothing when the attempt has no `logs/`."""
    try:
        logs = beneath.open_dir(paths.attempt_dir(attempt) / "logs")
    except FileNotFoundError:
        return [], []
    files: list[tuple[str, BinaryIO]] = []
    refused: list[str] = []
    try:
        with os.scandir(logs) as found:
            names = sorted(e.name for e in found
                           if e.name.endswith(".log") and not e.name.startswith("."))
        for name in names:
            try:
                files.append((name, os.fdopen(beneath.open_at(logs, name, shown=name), "rb")))
            except (beneath.Refused, FileNotFoundError) as exc:
                refused.append(str(exc))
    except BaseException:
        for _name, fh in files:
            fh.close()
        raise
    finally:
        os.close(logs)
    return files, refused


def export_logs(paths: RunPaths, attempt: int, dest: pathlib.Path,
                owner: tuple[int, int] | None = None) -> None:
    """Copy an ended attempt's task logs to `<dest>/attempt-<n>/` (a job's log_export_path,
    kept after the job is deleted).

    The logs are opened here (`open_logs`); they are written by a child process running
    as `owner` when given, so that only a folder that user may write is written. `dest`
    must be a real path, checked against the job's storage roots just before: the child
    refuses a link in it. A log a job replaced with a link or a hard link is left out, and
    said in the OSError raised once the others are copied.
    """
    if not os.path.lexists(paths.attempt_dir(attempt) / "logs"):
        return
    files, refused = open_logs(paths, attempt)
    try:
        _as_user("export", {"dest": str(dest / f"attempt-{attempt}"),
                            "files": [(name, fh.fileno()) for name, fh in files]},
                 owner, fds=[fh.fileno() for _name, fh in files])
    finally:
        for _name, fh in files:
            fh.close()
    if refused:
        raise beneath.Refused(f"logs left out: {'; '.join(refused)}")


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


def short_of_space(paths: Sequence[pathlib.Path], floor_bytes: int) -> str | None:
    """Why new work must wait for disk space: the first of `paths` (or its nearest existing
    parent) whose file system has less than `floor_bytes` free; None when all have more."""
    for path in paths:
        while not path.exists() and path != path.parent:
            path = path.parent
        free = shutil.disk_usage(path).free
        if free < floor_bytes:
            return (f"waiting for disk space: {free / 2**30:.1f} GiB free on the disk of "
                    f"{path}, below the floor of {floor_bytes / 2**30:.1f} GiB "
                    "(disk_free_floor_gb)")
    return None


def room_gb(path: pathlib.Path, keep_bytes: int) -> int | None:
    """Whole GB of the file system holding `path` (or its nearest existing parent) that is
    not to be kept free (`keep_bytes`): what jobs may fill there, together; None when it
    cannot be read."""
    while not path.exists() and path != path.parent:
        path = path.parent
    try:
        total = shutil.disk_usage(path).total
    except OSError:
        return None
    return max(0, total - keep_bytes) // 2**30
