"""The storage component: a thread beside the reconciler that moves files and metrics.

Each pass it reads the training metrics running jobs reported, fetches what waiting jobs
need, uploads output channels whose period is due, and finishes ended jobs (final metrics,
last upload, model registration). Transfers run on a small pool of threads so that a big
download never holds up another job's metrics or uploads; the reconciler's transactions
never wait for any of it.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

import sqlalchemy as sa

from corral import settings as settings_mod
from corral.domain import errors, leadership, pacing, specs
from corral.services import collect, finishing, following, staging
from corral.storage import objects
from corral.store import db, job_repo, rows, version_repo

log = logging.getLogger(__name__)
T = TypeVar("T")
#: passes that may fail to finish an ended job before it is given up on
MAX_FINISH_TRIES = 5


@dataclasses.dataclass
class Syncer:
    store: db.Store
    settings: settings_mod.Settings
    stores: objects.Stores
    wake: Callable[[], None] = lambda: None
    #: told of jobs whose phase it changed, once committed (a job whose inputs failed)
    changed: Callable[[Iterable[str]], None] = lambda _ids: None
    clock: Callable[[], float] = time.time
    workers: int = 4
    _pool: concurrent.futures.ThreadPoolExecutor | None = None
    _busy: set[tuple[str, str]] = dataclasses.field(default_factory=set)
    _lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)
    _uploads: dict[str, list[staging.Upload]] = dataclasses.field(default_factory=dict)
    _follows: dict[str, list[following.Follow]] = dataclasses.field(default_factory=dict)
    _specs: dict[str, specs.JobCreate] = dataclasses.field(default_factory=dict)
    _failures: dict[str, int] = dataclasses.field(default_factory=dict)
    _read: collect.Memo = dataclasses.field(default_factory=dict)

    def now(self) -> int:
        return round(self.clock() * 1000)

    def tick(self) -> None:
        with self.store.read() as conn:
            running = version_repo.running_jobs(conn)
            waiting = version_repo.staging_jobs(conn)
            ended = version_repo.unfinished_ended(conn)
        self._collect(running)
        for job in running:
            self._periodic_uploads(job)
            self._periodic_follows(job)
        for job in waiting:
            self._submit(("stage", job.id), self._stage, job)
        # Most ended jobs have nothing to move: they are finished together, one piece of
        # work for all; the others one by one, as their transfers take their own time.
        plain = [j for j in ended if j.deleted_at is not None or finishing.is_plain(
            self.settings, j, self._specs.get(j.id) or job_repo.job_spec(j),
            self._uploads.get(j.id))]
        self._submit_batch([("finish", j.id) for j in plain], self._finish_plain, plain)
        done = {j.id for j in plain}
        for job in ended:
            if job.id not in done:
                self._submit(("finish", job.id), self._finish, job)
        live = {j.id for j in running}
        for job_id in [j for j in self._follows if j not in live]:
            del self._follows[job_id]
        for job_id in [j for j in self._uploads if j not in live]:
            if not self._is_busy(("finish", job_id)):
                self._uploads.pop(job_id, None)
                self._specs.pop(job_id, None)
        if len(self._read) > 10_000:  # positions of long-gone jobs; re-reading is harmless
            self._read.clear()

    def close(self) -> None:
        """Stop its transfers (the next pass, here or on the next leader, takes them up)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        with self._lock:
            self._busy.clear()  # (what was cancelled never ran)

    # --- work ------------------------------------------------------------------------------

    def _collect(self, running: Sequence[rows.Job]) -> None:
        """The metrics the running jobs reported since the last pass (where each stands
        read for all of them at once: a thousand running jobs cost three queries)."""
        try:
            collect.collect_jobs(self.store, self.settings.runs_dir, [j.id for j in running],
                                 self.now, self._read)
        except sa.exc.IntegrityError:
            pass  # a job was purged while its metrics were read: the next pass goes on
        except (OSError, sa.exc.SQLAlchemyError):
            log.exception("reading the metrics of the running jobs failed")

    def _periodic_uploads(self, job: rows.Job) -> None:
        ups = self._uploads.get(job.id)
        if ups is None:
            ups = self._uploads[job.id] = staging.uploads_of(job, self._spec(job))
        mono = time.monotonic()
        for up in ups:
            if up.due(mono):
                up.last = mono
                self._submit(("upload", f"{job.id}/{up.channel}"), self._upload, up)

    def _periodic_follows(self, job: rows.Job) -> None:
        found = self._follows.get(job.id)
        if found is None:
            found = self._follows[job.id] = following.follows_of(job, self._spec(job))
        mono = time.monotonic()
        for f in found:
            if f.due(mono):
                f.last = mono
                self._submit(("follow", f"{job.id}/{f.channel}"), self._follow, f)

    def _follow(self, f: following.Follow) -> None:
        try:
            following.refresh(self.stores, self.settings, f)
        except Exception as exc:  # botocore and aiohttp raise their own types
            log.warning("input %s of job %s not brought up to date from %s: %s", f.channel,
                        f.job_id, f.url, exc)

    def _upload(self, up: staging.Upload) -> None:
        try:
            staging.upload(self.stores, self.settings, up)
        except Exception as exc:
            if not up.failing:  # one event per run of failures, not one per period
                up.failing = True
                self._event(up.job_id, f"Upload of output '{up.channel}' to {up.url} failed "
                            f"(tried {self.settings.upload_retries} times, will try again): "
                            f"{str(exc).strip().splitlines()[0] if str(exc) else exc!r}",
                            "Warning")
            return
        if up.failing:
            up.failing = False
            self._event(up.job_id, f"Upload of output '{up.channel}' to {up.url} works again",
                        "Info")

    def _stage(self, job: rows.Job) -> None:
        try:
            staging.Fetcher(self.store, self.stores, self.settings, self.now, job).run()
        except staging.StagingFailed as exc:
            staging.fail(self.store, job, self.now(), exc.message)
        except (OSError, errors.CorralError) as exc:
            staging.fail(self.store, job, self.now(), f"fetching inputs failed: {exc}")
        except sa.exc.SQLAlchemyError:
            raise  # the database, not the inputs: the next pass tries again
        self.changed([job.id])
        self.wake()

    def _finish(self, job: rows.Job) -> None:
        try:
            finishing.finish(self.store, self.stores, self.settings, job, self.now,
                             uploads=self._uploads.get(job.id))
        except leadership.LostLease:
            raise  # the server's, not the job's: the next leader finishes it
        except Exception as exc:
            # Tried again next pass (a database hiccup passes); a job that keeps failing
            # is given up on, said so, rather than retried every second for ever.
            tries = self._failures[job.id] = self._failures.get(job.id, 0) + 1
            if tries < MAX_FINISH_TRIES:
                raise
            self._failures.pop(job.id, None)
            self._event(job.id, f"Finishing the job failed {tries} times, giving up: {exc}",
                        "Error")
            finishing.mark_finished(self.store, job.id, self.now())

    def _finish_plain(self, jobs: list[rows.Job]) -> None:
        """Jobs with nothing to move, finished together; one by one if that fails (so that
        one job's trouble is retried and given up on alone)."""
        try:
            finishing.finish_plain(self.store, self.settings, jobs, self.now)
        except leadership.LostLease:
            raise
        except Exception:
            log.exception("finishing %d jobs together failed; trying them one by one",
                          len(jobs))
            for job in jobs:
                try:
                    self._finish(job)
                except leadership.LostLease:
                    raise
                except Exception:
                    log.exception("finishing job %s failed", job.id)

    # --- plumbing --------------------------------------------------------------------------

    def _spec(self, job: rows.Job) -> specs.JobCreate:
        spec = self._specs.get(job.id)
        if spec is None:
            spec = self._specs[job.id] = job_repo.job_spec(job)
        return spec

    def _is_busy(self, key: tuple[str, str]) -> bool:
        with self._lock:
            return key in self._busy

    def _submit(self, key: tuple[str, str], fn: Callable[[T], None], arg: T) -> None:
        with self._lock:
            if key in self._busy:
                return
            self._busy.add(key)
            if self._pool is None:
                self._pool = concurrent.futures.ThreadPoolExecutor(
                    self.workers, thread_name_prefix="corral-storage")
        try:
            self._pool.submit(self._run, key, fn, arg)
        except RuntimeError:  # shutting down
            with self._lock:
                self._busy.discard(key)

    def _submit_batch(self, keys: list[tuple[str, str]], fn: Callable[[list[T]], None],
                      items: list[T]) -> None:
        """One piece of work for those of `items` whose key is not busy already."""
        with self._lock:
            todo = [(k, i) for k, i in zip(keys, items, strict=True) if k not in self._busy]
            if not todo:
                return
            self._busy.update(k for k, _ in todo)
            if self._pool is None:
                self._pool = concurrent.futures.ThreadPoolExecutor(
                    self.workers, thread_name_prefix="corral-storage")
        try:
            self._pool.submit(self._run_batch, [k for k, _ in todo], fn, [i for _, i in todo])
        except RuntimeError:  # shutting down
            with self._lock:
                self._busy.difference_update(k for k, _ in todo)

    def _run(self, key: tuple[str, str], fn: Callable[[T], None], arg: T) -> None:
        self._run_batch([key], fn, arg)

    def _run_batch(self, keys: list[tuple[str, str]], fn: Callable[[T], None],
                   arg: T) -> None:
        try:
            fn(arg)
        except leadership.LostLease as exc:  # (a term that ends: no trouble of the jobs')
            log.info("storage work %s left to the next leader: %s",
                     keys[0] if len(keys) == 1 else keys, exc)
        except Exception:
            log.exception("storage work %s failed", keys[0] if len(keys) == 1 else keys)
        finally:
            with self._lock:
                self._busy.difference_update(keys)

    def _event(self, job_id: str, message: str, level: str) -> None:
        try:
            with self.store.begin() as conn:
                if job_repo.job_by_id(conn, job_id) is not None:
                    job_repo.add_event(conn, job_id, self.now(), message, level=level)
        except sa.exc.SQLAlchemyError:
            log.exception("cannot record an event of job %s", job_id)


def run_forever(syncer: Syncer, stop_event: threading.Event, interval: float) -> None:
    """A pass every `interval` (stretched where passes cost more than `pacing.SHARE` of a
    core), until `stop_event`."""
    wait = interval
    while not stop_event.wait(wait):
        cpu = time.thread_time()
        try:
            syncer.tick()
            wait = pacing.wait_after(interval, time.thread_time() - cpu)
        except sa.exc.OperationalError as exc:
            log.warning("storage pass skipped: %s", exc)
        except Exception:
            log.exception("storage pass failed")
    syncer.close()
