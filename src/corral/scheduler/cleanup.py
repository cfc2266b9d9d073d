"""What is left once a job has ended: its logs exported, and a deleted job purged.

A deleted job's rows are purged by the pass that finds it ended; its run directory is
removed after, on a thread of its own (it may be big). The directory says first that it
is to go (`runs.mark_purged`), so that a server killed between the purge and the
removal has its successor remove it (`sweep`). Exports of ended attempts' logs to a local
`log_export_path` run on the same thread, in order.
"""

from __future__ import annotations

import functools
import logging
import pathlib
import shutil
import threading
from collections.abc import Callable, Sequence

import sqlalchemy as sa

from corral import settings as settings_mod
from corral.domain import errors, jobs, leadership
from corral.scheduler import passes, workers
from corral.services import finishing, jobpaths
from corral.storage import objects, reserve, runs
from corral.store import db, job_repo, rows

log = logging.getLogger(__name__)
TERMINAL = frozenset(p.value for p in jobs.TERMINAL)
#: how long removing a deleted job's files waits for a stopped copy of its code to end
#: (a copy stops before its next file)
COPY_STOP_WAIT_S = 60.0
#: what corral 0.1 kept under the runs directory (run directories made ahead of time)
OLD_READY_DIR = ".ready"


def purge(conn: sa.Connection, p: passes.Pass, runs_dir: pathlib.Path) -> None:
    """Remove the rows of the deleted jobs that have ended (one still stopping is purged
    by a later pass)."""
    for job in job_repo.deleted_jobs(conn):
        if job.phase in TERMINAL:
            runs.mark_purged(runs.RunPaths(runs_dir, job.id))
            job_repo.purge_job(conn, job.id)
            p.purged.append(job.id)


class Files:
    """The thread that exports logs and removes deleted jobs' run directories."""

    def __init__(self, store: db.Store, settings: settings_mod.Settings,
                 now: Callable[[], int]) -> None:
        self.store = store
        self.runs_dir = settings.runs_dir
        self.now = now
        #: a log_export_path is checked against the job's roots again as it is written
        self.policies = jobpaths.Policies(store, settings)
        #: the user logs are exported as (jobpaths.task_user); None: the server's own
        self.owner = finishing.export_user(settings, warn=True)
        #: room kept for the database on the disk of CORRAL_HOME (see storage/reserve.py)
        self.reserve = reserve.Reserve(settings.home, settings.disk_reserve_mb << 20,
                                       int(settings.disk_free_floor_gb * 2**30))
        self._thread = workers.Workers("corral-files", 1)
        self._thread.submit(self._sweep)

    def export_logs(self, job: rows.Job, attempt: int) -> None:
        """Copy an ended attempt's logs to the job's local log_export_path, if it has one
        (one in object storage is services.finishing's)."""
        export = job_repo.job_spec(job).spec.log_export_path
        dest = export and (export.host_path or export.obs_url)
        if dest and not objects.is_remote(dest):
            self._thread.submit(functools.partial(self._export, job.id, job.project_id,
                                                  attempt, dest))

    def remove(self, job_id: str, copies: Sequence[threading.Event]) -> None:
        """Remove a purged job's run directory once the copies of its code that were
        stopped (`copies`) have ended: one still running would make its directories
        again."""
        self._thread.submit(functools.partial(self._remove, job_id, copies))

    def drain(self, timeout: float) -> bool:
        return self._thread.drain(timeout)

    def _export(self, job_id: str, project_id: str, attempt: int, dest: str) -> None:
        try:
            finishing.export_local_logs(self.policies.of(project_id),
                                        runs.RunPaths(self.runs_dir, job_id), attempt, dest,
                                        self.owner)
        except (OSError, errors.CorralError) as exc:
            try:
                with self.store.begin() as conn:
                    job_repo.add_event(conn, job_id, self.now(), f"Log export failed: {exc}",
                                       level="Warning")
            except (sa.exc.SQLAlchemyError, leadership.LostLease):
                # (purged meanwhile, the database away, or this server's term over)
                log.warning("exporting the logs of %s attempt %s failed: %s", job_id,
                            attempt, exc)

    def _remove(self, job_id: str, copies: Sequence[threading.Event]) -> None:
        for done in copies:
            done.wait(COPY_STOP_WAIT_S)
        runs.remove_job_dir(runs.RunPaths(self.runs_dir, job_id))

    def _sweep(self) -> None:
        """Remove the run directories of jobs purged before this start that were never
        removed: their directories say so, and their rows are gone."""
        shutil.rmtree(self.runs_dir / OLD_READY_DIR, ignore_errors=True)
        marked = runs.marked_purged(self.runs_dir)
        if not marked:
            return
        with self.store.read() as conn:
            left = job_repo.existing_jobs(conn, marked)
        gone = [job_id for job_id in marked if job_id not in left]
        for job_id in gone:
            runs.remove_job_dir(runs.RunPaths(self.runs_dir, job_id))
        if gone:
            log.info("removed the run directories of %d deleted jobs that a server before "
                     "this one left behind", len(gone))


