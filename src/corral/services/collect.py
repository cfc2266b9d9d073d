"""Reading the training metrics jobs report out of their logs and metrics files.

A task reports metrics as `corral:metrics` lines in its log or as JSON lines in the file
named by CORRAL_METRICS_FILE (see `domain.metrics`). Both are read from where the last read
stopped; the points and the new position are stored in one transaction, so a server that
dies mid-read neither loses nor repeats a point.
"""

from __future__ import annotations

import logging
import os
import pathlib
from collections.abc import Callable, Sequence
from typing import Any, BinaryIO

from corral.domain import metrics
from corral.oskit import beneath
from corral.storage import runs
from corral.store import db, version_repo

log = logging.getLogger(__name__)
#: at most this much of a file is read per pass (the rest waits for the next pass)
CHUNK = 4 * 1024 * 1024


def task_files(paths: runs.RunPaths, attempt: int, task: str) -> dict[str, pathlib.Path]:
    return {"log": paths.log_path(attempt, task), "file": paths.metrics_path(attempt, task)}


#: how far past the stored position a file may be read without storing the new position
#: (a log without metrics lines is not worth a write every pass; after a restart at most
#: this much is read again, and finds nothing again)
UNSAVED = 8 * 1024 * 1024
Memo = dict[tuple[str, int, str, str], int]
#: in a memo: the file was refused (and said so), nothing of it read
REFUSED = -1


def collect_job(store: db.Store, runs_dir: pathlib.Path, job_id: str,
                now: Callable[[], int], memo: Memo | None = None) -> int:
    """Read what every task of the job reported since the last read; returns new points.

    `memo` keeps how far files were read without finding anything, between passes.
    """
    return collect_jobs(store, runs_dir, [job_id], now, memo)


def collect_jobs(store: db.Store, runs_dir: pathlib.Path, job_ids: Sequence[str],
                 now: Callable[[], int], memo: Memo | None = None) -> int:
    """collect_job for several jobs, with where each stands read in one transaction."""
    if not job_ids:
        return 0
    memo = {} if memo is None else memo
    with store.read() as conn:
        done = version_repo.offsets_of(conn, job_ids)
        tasks = version_repo.tasks_of(conn, job_ids)
        stored = version_repo.count_points_of(conn, job_ids) if tasks else {}
    return sum(_collect(store, runs_dir, job_id, tasks.get(job_id, []),
                        done.setdefault(job_id, {}), stored.get(job_id, 0), now, memo)
               for job_id in job_ids)


def _collect(store: db.Store, runs_dir: pathlib.Path, job_id: str,
             tasks: Sequence[tuple[int, str]], done: dict[tuple[int, str, str], int],
             stored: int, now: Callable[[], int], memo: Memo) -> int:
    paths = runs.RunPaths(runs_dir, job_id)
    added = 0
    for attempt, task in tasks:
        for source, path in task_files(paths, attempt, task).items():
            key = (job_id, attempt, task, source)
            saved = done.get((attempt, task, source), 0)
            start = max(saved, memo.get(key, 0))
            if not _grown(path, start):
                continue
            fh = _open(path, key, memo)
            if fh is None:
                continue
            with fh:
                if os.fstat(fh.fileno()).st_size <= start:
                    continue
                found, position = read_points(fh, start, source)
            memo[key] = position
            room = max(0, metrics.MAX_POINTS_PER_JOB - stored - added)
            rows = [_row(job_id, attempt, task, p, now()) for p in found[:room]]
            if not rows and position - saved < UNSAVED:
                continue
            with store.begin() as conn:
                version_repo.save_points(conn, job_id, attempt, task, source, position, rows,
                                          first=(attempt, task, source) not in done)
            done[(attempt, task, source)] = position
            added += len(rows)
    return added


def _grown(path: pathlib.Path, start: int) -> bool:
    """Whether the file may hold more than its first `start` bytes: one lstat, so that a
    pass over a thousand quiet jobs opens nothing (what it opens is checked for links then,
    by `_open`)."""
    try:
        return os.lstat(path).st_size > start
    except OSError:
        return False


def _open(path: pathlib.Path, key: tuple[str, int, str, str], memo: Memo) -> BinaryIO | None:
    """The file opened for reading, or None: there is none (yet), or it is one a job
    planted (said once per file)."""
    try:
        return runs.open_run_file(path)
    except beneath.Refused as exc:
        if memo.get(key) != REFUSED:
            log.warning("not reading the metrics of %s: %s", path, exc)
            memo[key] = REFUSED
    except OSError:
        pass
    return None


def read_points(fh: BinaryIO, start: int, source: str) -> tuple[list[metrics.Point], int]:
    """Points in the whole lines of file `fh` from byte `start`, and where they end."""
    fh.seek(start)
    data = fh.read(CHUNK)
    end = data.rfind(b"\n")
    if end < 0:
        # No whole line yet; a line longer than a chunk is no metrics line: skip it.
        return [], start + len(data) if len(data) >= CHUNK else start
    data = data[:end + 1]
    out: list[metrics.Point] = []
    if source == "log" and metrics.PREFIX_BYTES not in data:
        return out, start + len(data)
    for raw in data.splitlines():
        line = raw.decode("utf-8", "replace")
        out += metrics.parse_line(line) if source == "log" else metrics.parse_json(line)
    return out, start + len(data)


def _row(job_id: str, attempt: int, task: str, p: metrics.Point, now: int) -> dict[str, Any]:
    return {"job_id": job_id, "attempt": attempt, "task": task, "step": p.step,
            "name": p.name, "value": p.value, "time": p.time_ms or now}
