"""The notebooks' controller: one level-triggered pass over every live notebook.

Each pass reads the notebooks and their session jobs, then for each one does what its
state asks: submits the session job, notices that its JupyterLab answers (RUNNING), stops
it when its lease says so, shuts it down gracefully (Jupyter's shutdown, then the job's
stop), notices a session that ended by itself, and removes deleted notebooks once their
jobs have ended. Talking to JupyterLab happens outside any transaction; every write is a
guarded transition, so that a pass that acts on what a user just changed does nothing.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import shutil
from typing import Any

import sqlalchemy as sa

from corral import settings as settings_mod
from corral.domain import errors, jobs, notebooks
from corral.executors import base
from corral.kinds import loop, owned
from corral.kinds.notebooks import jupyter, session, sockets
from corral.services import jobpaths, runtime
from corral.store import db, job_repo, kind_repo, kind_rows, notebook_repo, rows

log = logging.getLogger(__name__)
State = notebooks.State


def owner_of(nb: kind_rows.Notebook) -> owned.Owner:
    return owned.Owner(kind=notebooks.KIND, id=nb.id, project_id=nb.project_id,
                       user_name=nb.user_name, name=nb.name)


def where(settings: settings_mod.Settings, nb: kind_rows.Notebook,
          handle: base.Handle | None) -> jupyter.Where | None:
    """Where the notebook's session listens, once it has answered."""
    if nb.ready_at is None:
        return None
    return endpoint(settings, nb, handle)


def endpoint(settings: settings_mod.Settings, nb: kind_rows.Notebook,
             handle: base.Handle | None) -> jupyter.Where | None:
    """Where the session's JupyterLab listens: its socket here, or (a session on a Ray
    node: it has a port) the address of the node its job's task runs on (None while it
    has none), with its token."""
    url = session.base_url(nb.id)
    if nb.port is None:
        return jupyter.Where(sock=sockets.address(session.socket_path(settings, nb)),
                             base_url=url)
    if handle is None or not handle.address:
        return None
    return jupyter.Where(base_url=url, host=handle.address, port=nb.port,
                         token=nb.jupyter_token or "")


def session_handle(conn: sa.Connection, job: rows.Job) -> base.Handle | None:
    """The handle of the session job's latest launched task."""
    launched = [t for t in job_repo.tasks_of(conn, job.id) if t.handle]
    if not launched:
        return None
    return base.Handle.loads(max(launched, key=lambda t: t.attempt).handle or "")


def endpoint_of(conn: sa.Connection, settings: settings_mod.Settings,
                nb: kind_rows.Notebook) -> jupyter.Where | None:
    """`endpoint`, its session's task read from the database (the proxy)."""
    if nb.port is None:
        return endpoint(settings, nb, None)
    job = job_repo.owned_jobs(conn, notebooks.KIND, nb.id).get(session.role(nb.session))
    return endpoint(settings, nb, session_handle(conn, job) if job else None)


@dataclasses.dataclass
class Controller:
    store: db.Store
    settings: settings_mod.Settings
    services: runtime.Runtime
    kind: str = notebooks.KIND
    #: sessions whose JupyterLab was asked to shut down (asking again is harmless)
    _asked: set[tuple[str, int]] = dataclasses.field(default_factory=set)

    def reconcile(self, now: int) -> bool:
        with self.store.read() as conn:
            todo = [(nb, job_repo.owned_jobs(conn, self.kind, nb.id))
                    for nb in notebook_repo.live(conn)]
        for nb, owned_jobs in todo:
            loop.isolated(self.store, self.kind, nb.id, now,
                          functools.partial(self._step, nb, owned_jobs, now))
        return False

    def _step(self, nb: kind_rows.Notebook, owned_jobs: dict[str, rows.Job], now: int) -> bool:
        job = owned_jobs.get(session.role(nb.session))
        match State(nb.state):
            case State.STARTING:
                self._starting(nb, job, now)
            case State.RUNNING:
                self._running(nb, job, now)
            case State.STOPPING:
                self._stopping(nb, job, now)
            case State.DELETING:
                self._deleting(nb, list(owned_jobs.values()), now)
        return False

    # --- a session on its way up ---------------------------------------------------------

    def _starting(self, nb: kind_rows.Notebook, job: rows.Job | None, now: int) -> None:
        if job is None:
            self._submit(nb, now)
        elif owned.ended(job):
            self._ended(nb, job, now)
        elif job.phase == jobs.Phase.RUNNING:
            self._came_up(nb, job, now)

    def _submit(self, nb: kind_rows.Notebook, now: int) -> None:
        try:
            owner = jobpaths.task_user(self.settings, quiet=True)
            read, remote = nb, session.remote(self.services.catalog, nb.pool_id)
            if remote:  # on a Ray node: a port and a token of its own
                port, token = session.tcp_session()
                nb = dataclasses.replace(nb, port=port, jupyter_token=token)
            session.prepare(self.settings, nb, owner)
            if remote:
                session.write_token(self.settings, nb, owner)
            body = session.job_body(self.settings, self.services.catalog, nb)
            with self.store.begin() as conn:
                if remote and not notebook_repo.update(conn, read, now, port=nb.port,
                                                       jupyter_token=nb.jupyter_token):
                    return  # changed since it was read: the next pass looks again
                job = owned.submit(conn, self.services, owner_of(nb), session.role(nb.session),
                                   body, now)
                kind_repo.add_event(conn, self.kind, nb.id, now,
                                    f"Session {nb.session} queued: job {job.id}")
        except (errors.CorralError, OSError) as exc:
            reason = exc.message if isinstance(exc, errors.CorralError) else str(exc)
            self._fail(nb, now, f"its session could not be submitted: {reason}")
            return
        self.services.wake()
        log.info("notebook %s: session %d is job %s", nb.id, nb.session, job.id)

    def _came_up(self, nb: kind_rows.Notebook, job: rows.Job, now: int) -> None:
        if nb.port is not None:  # on a Ray node: it answers with its token, or not yet
            found = endpoint(self.settings, nb, self._handle(job))
            up = found is not None and jupyter.answers(found)
        else:
            listening = self._listening(nb, job, now)
            if listening is None:  # something else listens there: the session failed
                return
            found = endpoint(self.settings, nb, None)
            up = listening and found is not None and jupyter.answers(found)
        if up:
            timing = nb.lease_type == notebooks.LeaseType.TIMING
            with self.store.begin() as conn:
                notebook_repo.transition(
                    conn, nb, to=State.RUNNING, now=now,
                    message=f"Session {nb.session} is up: JupyterLab answers (job {job.id})",
                    ready_at=now, stops_at=now + nb.lease_ms if timing else None,
                    last_active_at=now, checked_at=now)
            return
        with self.store.read() as conn:
            attempts = job_repo.attempts_of(conn, job.id)
        began = attempts[-1].start_at if attempts else job.start_time or now
        limit = self.settings.notebook_start_timeout
        if now - began > limit * 1000:
            self._fail(nb, now, f"JupyterLab did not answer within {limit:g} s of its start "
                       f"(see the log of job {job.id})", stop_job=True)

    def _listening(self, nb: kind_rows.Notebook, job: rows.Job, now: int) -> bool | None:
        """Whether the session's JupyterLab listens at the socket the server chose for it
        (False: not yet). The socket is taken as the server's first (nobody else can reach
        or replace it from then on), then the process at its other end must be the
        session's (sockets.py). Something else listening there is never talked to: the
        session fails (None)."""
        sock = session.socket_path(self.settings, nb)
        handle = self._handle(job)
        if handle is None or not sockets.claim(sock):
            return False
        pid = sockets.listener(sock, wait=sockets.LISTEN_WAIT)  # it listens once taken
        if pid is None:
            return False
        if sockets.descends(pid, handle.pid, handle.start_time):
            return True
        log.warning("notebook %s: process %d, not its session's, listens at %s", nb.id, pid,
                    sock)
        self._fail(nb, now, f"something other than its JupyterLab listens at its socket "
                   f"(process {pid})", stop_job=True)
        return None

    def _handle(self, job: rows.Job) -> base.Handle | None:
        with self.store.read() as conn:
            return session_handle(conn, job)

    # --- a session that is up --------------------------------------------------------------

    def _running(self, nb: kind_rows.Notebook, job: rows.Job | None, now: int) -> None:
        if job is None or owned.ended(job):
            self._ended(nb, job, now)
            return
        if job.phase != jobs.Phase.RUNNING:  # queued again (its node was lost, say)
            with self.store.begin() as conn:
                moved = notebook_repo.transition(
                    conn, nb, to=State.STARTING, now=now,
                    message=f"Session {nb.session} is queued again: {job.wait_reason or ''}",
                    level="Warning")
            if moved:  # the server's now: the next JupyterLab could not listen there
                self._forget_socket(nb)
            return
        reason = self._lease_ends(nb, job, now)
        if reason is not None:
            with self.store.begin() as conn:
                notebook_repo.transition(
                    conn, nb, to=State.STOPPING, now=now,
                    message=f"Stopping: {reason}", stop_requested_at=now, stop_reason=reason)

    def _lease_ends(self, nb: kind_rows.Notebook, job: rows.Job, now: int) -> str | None:
        if nb.lease_type == notebooks.LeaseType.TIMING:
            return notebooks.lease_stop(nb.lease_type, nb.lease_ms, now=now,
                                        stops_at=nb.stops_at, last_active=None, busy=False)
        if now - (nb.checked_at or 0) < self.settings.notebook_check_interval * 1000:
            return None
        found = where(self.settings, nb, self._handle(job))
        seen = jupyter.activity(found) if found is not None else None
        with self.store.read() as conn:
            gpu = notebook_repo.last_gpu_use(conn, job.id, since=nb.ready_at or 0)
        # A JupyterLab that does not answer is not known to be idle: it is left be.
        busy = seen is None or seen.busy
        last = notebooks.idle_since(nb.ready_at, nb.last_request_at, nb.last_active_at,
                                    seen.last if seen else None, gpu, now if busy else None)
        with self.store.begin() as conn:
            notebook_repo.update(conn, nb, now, last_active_at=last, checked_at=now)
        return notebooks.lease_stop(nb.lease_type, nb.lease_ms, now=now, stops_at=None,
                                    last_active=last, busy=busy)

    # --- a session on its way down ---------------------------------------------------------

    def _stopping(self, nb: kind_rows.Notebook, job: rows.Job | None, now: int) -> None:
        if job is None or owned.ended(job):
            with self.store.begin() as conn:
                notebook_repo.transition(
                    conn, nb, to=State.STOPPED, now=now,
                    message=f"Stopped: {nb.stop_reason or 'asked to'}", **_closed())
            self._asked.discard((nb.id, nb.session))
            self._forget_socket(nb)
            return
        self._wind_down(nb, job, now, gracefully=True)

    def _wind_down(self, nb: kind_rows.Notebook, job: rows.Job, now: int, *,
                   gracefully: bool) -> None:
        """JupyterLab's own shutdown first (its kernels and terminals end cleanly), then,
        if the job still runs after the grace period, the job's stop."""
        if job.terminate_requested_at is not None:
            return
        key = (nb.id, nb.session)
        found = where(self.settings, nb, self._handle(job))
        if gracefully and found is not None and job.phase == jobs.Phase.RUNNING:
            if key not in self._asked:
                self._asked.add(key)
                jupyter.shut_down(found)
                return
            asked_at = nb.stop_requested_at or now
            if now - asked_at < self.settings.grace_period * 1000:
                return
        with self.store.begin() as conn:
            owned.stop(conn, owner_of(nb), now, f"Notebook {nb.name} stopped: "
                       f"{nb.stop_reason or 'deleted'}")
        self.services.wake()

    def _deleting(self, nb: kind_rows.Notebook, all_jobs: list[rows.Job], now: int) -> None:
        running = [j for j in all_jobs if not owned.ended(j)]
        for job in running:
            self._wind_down(nb, job, now, gracefully=False)
        if running:
            return
        # Its files first, while its row still says it is being deleted: once it answers
        # 404 nothing of it is left (a server killed in between removes them again).
        shutil.rmtree(session.state_dir(self.settings, nb.id), ignore_errors=True)
        sockets.remove(session.sockets_dir(self.settings), session.socket_pattern(nb.id))
        with self.store.begin() as conn:
            owned.delete(conn, owner_of(nb), now)
            notebook_repo.delete(conn, nb.id)
        self.services.wake()

    # --- a session that ended by itself ----------------------------------------------------

    def _ended(self, nb: kind_rows.Notebook, job: rows.Job | None, now: int) -> None:
        phase = job.phase if job is not None else None
        if phase == jobs.Phase.COMPLETED:
            to, reason = State.STOPPED, "JupyterLab was shut down"
        elif phase == jobs.Phase.TERMINATED:
            to, reason = State.STOPPED, "its session job was stopped"
        else:
            to = State.FAILED
            reason = ((job.failure_message if job is not None else None)
                      or "its session job is gone")
        # A compare-and-set: a user's stop since it was read (Stopping, which the table
        # also lets end Stopped) is left to `_stopping`, which ends it for the user's reason.
        with self.store.begin() as conn:
            notebook_repo.transition(
                conn, nb, to=to, now=now, unchanged=True,
                message=f"Session {nb.session} ended: {reason}",
                level="Info" if to is State.STOPPED else "Error", stop_reason=reason,
                **_closed())
        self._forget_socket(nb)

    def _fail(self, nb: kind_rows.Notebook, now: int, reason: str, *,
              stop_job: bool = False) -> None:
        with self.store.begin() as conn:
            moved = notebook_repo.transition(
                conn, nb, to=State.FAILED, now=now,
                message=f"Session {nb.session} failed: {reason}", level="Error",
                stop_reason=reason, **_closed())
            if moved and stop_job:
                owned.stop(conn, owner_of(nb), now, f"Notebook {nb.name} failed: {reason}")
        self.services.wake()

    def _forget_socket(self, nb: kind_rows.Notebook) -> None:
        """Remove the session's socket, the server's once it was taken (a job could not)."""
        sockets.remove(session.sockets_dir(self.settings),
                       session.socket_path(self.settings, nb).name)


def _closed() -> dict[str, Any]:
    """What an ended session leaves behind: nothing that reaches it."""
    return {"port": None, "cookie_secret": None, "access_token": None,
            "jupyter_token": None}
