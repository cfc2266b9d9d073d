"""Starting an attempt's tasks, and watching the launches this server made or adopted.

A pass records an attempt's tasks as `launching`, each with a fresh launch id, in the
transaction that decides to start them; their processes are started once it has committed,
and their handles recorded right after in a transaction of their own. A server killed in
between leaves tasks `launching` with no handle: the next one asks the executor to
`recover` each launch, which its claim says ran (adopt it) or never will (launch it anew,
under a new id). So no task runs twice and none is forgotten.

Adopting a task and recovering a launch each ask the executor about it, on a cluster a
round trip to the task's node (seconds where the cluster is slow), and a local launch whose
keeper has not recorded its task yet is waited for: a pass asks them before its write
transaction (`ask_unknown`), not in it, where every other writer (a submission, the renewal
of this server's leadership lease) would wait as long. Polling a task this server watches
is answered from what the executor already tracks.

Copying an attempt's code aside takes as long as the code is big: it runs on a thread of
its own (`CodeCopy`), and the pass after it has finished launches the tasks.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import pathlib
import threading
import time
from collections.abc import Callable, Mapping, Sequence

import sqlalchemy as sa

from corral import settings as settings_mod
from corral.domain import errors, jobs, resources, specs
from corral.executors import base
from corral.scheduler import launching, passes, workers
from corral.services import catalog as catalog_mod
from corral.services import jobpaths
from corral.storage import envs as storage_envs
from corral.storage import paths as storage_paths  # `paths` names a job's RunPaths here
from corral.storage import runs
from corral.store import db, job_repo, rows

log = logging.getLogger(__name__)
#: threads copying attempts' code at once
COPIERS = 2
#: how long a scheduler that stops waits for its stopped copies of code to end
COPY_STOP_S = 10.0
#: a task, its handle once launched, or None and why it failed to start
Outcome = tuple[rows.Task, base.Handle | None, str]


@dataclasses.dataclass(eq=False)
class CodeCopy:
    """An attempt whose code is copied on a thread of its own before its tasks launch."""

    job: rows.Job
    attempt: int
    tasks: list[rows.Task]
    gang: list[str]  #: the node of every task of the attempt, by rank
    spec: specs.JobCreate
    paths: runs.RunPaths
    done: threading.Event = dataclasses.field(default_factory=threading.Event)
    #: nobody wants it any more (its job stopped, the server is stopping): the copy stops
    cancelled: bool = False
    code: pathlib.Path | None = None
    cwd: pathlib.Path | None = None
    error: str | None = None


class Launches:
    def __init__(self, store: db.Store, executor: base.Executor,
                 settings: settings_mod.Settings, catalog: catalog_mod.Catalog, *,
                 run_as: tuple[int, int] | None = None,
                 environ: Mapping[str, str] | None = None,
                 wake: Callable[[], None] = lambda: None) -> None:
        self.store = store
        self.executor = executor
        self.settings = settings
        self.catalog = catalog  #: kept current by the reconciler as nodes come and go
        self.run_as = run_as  #: (uid, gid) tasks run as (jobpaths.task_user)
        self.wake = wake  #: asks for a pass (a copy of code is done)
        #: each project's storage roots, which the paths a job named must still lie in as
        #: its attempt is prepared
        self.policies = jobpaths.Policies(store, settings)
        #: what every task's environment starts from: the server's, as it is now, less
        #: what never reaches a job
        self.inherited = launching.base_env(os.environ if environ is None else environ,
                                            settings.job_env_deny)
        #: launch ids whose tasks the executor watches for this server (polled, not adopted)
        self.known: set[str] = set()
        #: whether a live task may be one this server has neither adopted nor recovered
        #: (none is known at first); `ask_unknown` then reads the live tasks
        self._unknown = True
        #: what the executor said of those, outside the pass's transaction, by the task's
        #: (launch id, handle) as read then
        self._asked: dict[tuple[str, str | None], base.Status | None] = {}
        self._copies: dict[tuple[str, int], CodeCopy] = {}
        #: copies done, whose tasks are launched once the pass that took them has committed
        self._copied: list[CodeCopy] = []
        #: copies stopped while their threads may still run, by job: removing the job's
        #: files waits for them (they would make its directories again)
        self._stopped: dict[str, list[CodeCopy]] = {}
        self._copiers = workers.Workers("corral-copy", COPIERS)

    # --- launching ------------------------------------------------------------------------

    def start(self, job: rows.Job, attempt: int, tasks: Sequence[rows.Task],
              gang: Sequence[str] | None = None) -> list[Outcome]:
        """Launch an attempt's tasks, or hand its code to a copier thread first (then
        nothing is launched now: a later pass does it, see `take_copied`)."""
        spec = job_repo.job_spec(job)
        gang = [t.node for t in sorted(tasks, key=lambda t: t.rank)] if gang is None else gang
        paths = runs.RunPaths(self.settings.runs_dir, job.id)
        ships = isinstance(self.executor, base.ShipsCode)
        if launching.needs_snapshot(paths, attempt, spec.algorithm) or (
                spec.algorithm.code_dir and ships):
            # (A relaunch after a restart finds the snapshot made but perhaps not shipped.)
            copy = CodeCopy(job=job, attempt=attempt, tasks=list(tasks), gang=list(gang),
                            spec=spec, paths=paths)
            self._copies[(job.id, attempt)] = copy
            self._copiers.submit(functools.partial(self._copy, copy))
            return []
        try:
            code, cwd = launching.prepare_attempt(paths, attempt, spec.algorithm, self.run_as,
                                                  policy=self._policy(job))
        except (errors.CorralError, OSError) as exc:
            return [(t, None, _message(exc)) for t in tasks]
        return [self._launch(job, spec, paths, t, code, cwd, gang) for t in tasks]

    def relaunch(self, job_id: str, attempt: int) -> list[Outcome]:
        """Start the tasks of an attempt still `launching` whose launch never ran."""
        with self.store.read() as conn:
            job = job_repo.job_by_id(conn, job_id)
            every = job_repo.tasks_of(conn, job_id, attempt)
        tasks = [t for t in every if t.state == jobs.TaskState.LAUNCHING.value]
        if job is None or not tasks:
            return []
        return self.start(job, attempt, tasks, gang=[t.node for t in every])

    def launch_copied(self) -> list[Outcome]:
        """Launch the tasks of the copies `take_copied` took."""
        copied, self._copied = self._copied, []
        return [self._launch(c.job, c.spec, c.paths, t, c.code, c.cwd, c.gang)
                for c in copied for t in c.tasks]

    def _launch(self, job: rows.Job, spec: specs.JobCreate, paths: runs.RunPaths,
                t: rows.Task, code: pathlib.Path | None, cwd: pathlib.Path | None,
                gang: Sequence[str]) -> Outcome:
        assert cwd is not None
        try:
            ls = launching.launch_spec(
                paths=paths, cat=self.catalog, spec=spec, job_id=job.id, attempt=t.attempt,
                task=t.name, rank=t.rank, launch_id=t.launch_id, node=t.node,
                gpu_ids=passes.gpu_ids(t), master_port=job.master_port or 29500, code=code,
                cwd=cwd, inherited=self.inherited, run_as=self.run_as,
                demand=passes.per_task(job), gang=gang,
                accel_ids=resources.parse_device_ids(t.accel_ids),
                envs=storage_envs.Cache(self.settings.envs_dir))
            handle = self.executor.launch(ls)
        except errors.CorralError as exc:
            return t, None, exc.message
        self.known.add(t.launch_id)
        return t, handle, ""

    def record(self, conn: sa.Connection, outcomes: Sequence[Outcome],
               events: job_repo.Events, now: int) -> None:
        """Record the handles of started tasks (or why they failed to start)."""
        for t, handle, err in outcomes:
            if handle is not None:
                job_repo.update_live_task(conn, t, state=jobs.TaskState.RUNNING.value,
                                          handle=handle.dumps(), launched_at=now)
            else:
                job_repo.update_live_task(conn, t, state=jobs.TaskState.FAILED_TO_START.value,
                                          message=err, ended_at=now)
                events.add(t.job_id, now, f"Task {t.name} failed to start: {err}",
                           level="Error", source="Task")

    # --- code copies ----------------------------------------------------------------------

    def _copy(self, copy: CodeCopy) -> None:
        """(a copier thread) Copy an attempt's code aside (and, where the executor ships
        code, ship it), then ask for a pass. A server that stops leaves a copy unfinished:
        the next one copies that attempt again (its launch was never sent)."""
        if not copy.cancelled:
            try:
                copy.code, copy.cwd = launching.prepare_attempt(
                    copy.paths, copy.attempt, copy.spec.algorithm, self.run_as,
                    cancelled=lambda: copy.cancelled, policy=self._policy(copy.job))
                if copy.code is not None and not copy.cancelled and isinstance(
                        self.executor, base.ShipsCode):
                    self.executor.stage_code(copy.tasks[0].node, str(copy.code))
            except (errors.CorralError, OSError) as exc:
                copy.error = _message(exc)
            except Exception as exc:  # never leave the attempt waiting on a dead copy
                log.exception("copying attempt %s of %s failed", copy.attempt, copy.job.id)
                copy.error = f"preparing the attempt failed: {exc}"
        copy.done.set()
        if not copy.cancelled:
            self.wake()

    def _policy(self, job: rows.Job) -> storage_paths.Policy:
        return self.policies.of(job.project_id)

    def copying(self) -> set[str]:
        """The launch ids of tasks whose code is being copied: not launched yet, and so
        not to be recovered."""
        return {t.launch_id for c in (*self._copies.values(), *self._copied) for t in c.tasks}

    def take_copied(self, conn: sa.Connection, p: passes.Pass) -> None:
        """(first transaction) Take the attempts whose copy has ended, to be launched once
        the pass has committed (`launch_copied`). One whose job was stopped (or is being
        preempted) meanwhile never starts: its copy stops and its tasks are settled as
        never started at once, without waiting for the copy. One whose copy failed fails
        to start."""
        for key, copy in list(self._copies.items()):
            job = job_repo.job_by_id(conn, key[0])
            if job is None or job.phase != jobs.Phase.RUNNING.value \
                    or job.preempt_requested_at is not None:
                copy.cancelled = True
                del self._copies[key]
                if not copy.done.is_set():  # its thread may still make directories
                    self._stopped.setdefault(key[0], []).append(copy)
                passes.never_started(conn, copy.tasks, p.now)
            elif copy.done.is_set():
                del self._copies[key]
                if copy.error is not None:
                    self.record(conn, [(t, None, copy.error) for t in copy.tasks], p.events,
                                p.now)
                else:
                    self._copied.append(copy)

    def stopped_copies(self, job_id: str) -> list[threading.Event]:
        """The copies of a job's code that were stopped and may still run (each one's
        `done`), forgotten from here on."""
        for other in [j for j, cs in self._stopped.items() if all(c.done.is_set() for c in cs)]:
            if other != job_id:
                del self._stopped[other]
        return [c.done for c in self._stopped.pop(job_id, [])]

    # --- watching -------------------------------------------------------------------------

    def ask_unknown(self, leading: Callable[[], bool]) -> None:
        """(before a pass's first transaction) Adopt or recover the live tasks this server
        does not know yet: those of a term just begun, a launch cut short. Only while
        `leading` (recovering a launch settles it), asked again before each. Reads nothing
        once every live task is known, as in most passes."""
        self._asked = {}
        if not self._unknown or not leading():
            return
        with self.store.read() as conn:
            live = job_repo.live_tasks(conn)
        self._unknown = False
        copying = self.copying()
        for t in live:
            if t.state == jobs.TaskState.LAUNCHING.value or (
                    t.handle is not None
                    and base.Handle.loads(t.handle).launch_id not in self.known):
                if not leading():
                    self._unknown = True
                    return
                self._asked[(t.launch_id, t.handle)] = self._ask(t, copying)

    def unsettled(self) -> None:
        """Launches were made whose handles may not be recorded (the pass failed after
        them): the next pass recovers them before its transaction."""
        self._unknown = True

    def status_of(self, t: rows.Task, copying: set[str]) -> base.Status | None:
        """What the executor says of a live task (what `ask_unknown` was told, where it
        asked); None while its code is being copied."""
        key = (t.launch_id, t.handle)
        if key in self._asked:
            return self._asked.pop(key)
        return self._ask(t, copying)

    def _ask(self, t: rows.Task, copying: set[str]) -> base.Status | None:
        if t.state == jobs.TaskState.LAUNCHING.value:
            if t.launch_id in copying:
                return None
            self._unknown = True  # (adopted next: its handle is not known)
            return self.executor.recover(self.bare_spec(t))
        assert t.handle is not None
        handle = base.Handle.loads(t.handle)
        if handle.launch_id in self.known:
            status = self.executor.poll(handle)
            if status.unsure:  # (the executor had to adopt it again, and could not yet)
                self.known.discard(handle.launch_id)
                self._unknown = True
            return status
        self._unknown = True
        status = self.executor.adopt(handle)
        if status.unsure:  # (adopted again by the next pass)
            log.info("cannot adopt %s/%s yet: %s", t.job_id, t.name, status.message)
        elif status.state is base.State.RUNNING:
            self.known.add(handle.launch_id)
            log.info("adopted %s/%s pid %s", t.job_id, t.name, handle.pid)
        return status

    def bare_spec(self, t: rows.Task) -> base.LaunchSpec:
        """What `recover` needs of a launch: where its claim and log are."""
        paths = runs.RunPaths(self.settings.runs_dir, t.job_id)
        return base.LaunchSpec(
            job_id=t.job_id, task=t.name, attempt=t.attempt, launch_id=t.launch_id,
            argv=(), cwd="", env={}, log_path=str(paths.log_path(t.attempt, t.name)),
            control_dir=str(paths.control_dir(t.attempt)), node=t.node)

    def release(self, t: rows.LiveTask, status: base.Status) -> None:
        """Forget a task that has ended; nothing of a stopped or failed one stays."""
        assert status.handle is not None
        if (status.state is not base.State.EXITED or status.exit_code != 0
                or t.job_phase != jobs.Phase.RUNNING.value):
            self.executor.clean_up(status.handle)
        self.executor.release(status.handle)
        self.known.discard(status.handle.launch_id)

    def close(self) -> None:
        """Stop the copies under way: their launches were never sent, and the next start
        copies those attempts again. Returns once their threads have ended (a stopped copy
        ends within a tenth of a second; at most COPY_STOP_S): this server's next term may
        copy the same attempt at once, and two copies of one attempt, in one folder under
        one temporary name, undo each other's work (the new one failed the job)."""
        copies = list(self._copies.values())
        for copy in copies:
            copy.cancelled = True
        deadline = time.monotonic() + COPY_STOP_S
        for copy in copies:
            if not copy.done.wait(max(0.0, deadline - time.monotonic())):
                log.warning("the copy of %s's code for attempt %d did not stop within %.0f s",
                            copy.job.id, copy.attempt, COPY_STOP_S)


def _message(exc: Exception) -> str:
    return exc.message if isinstance(exc, errors.CorralError) else str(exc)
