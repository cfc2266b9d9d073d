"""The embedded platform in one process: API, reconciler and executors.

Several servers may share one PostgreSQL database: each serves the API, and the one that
holds the leadership lease schedules (services/leasing.py; docs/high-availability.md).
A SQLite database serves one server: it holds an exclusive lock on its CORRAL_HOME and on
the database file for as long as it runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import gc
import importlib.util
import json
import logging
import os
import signal
import socket
import threading
import time
import types
from collections.abc import Iterable, Iterator
from typing import IO, Any

import uvicorn

from corral import running
from corral import settings as settings_mod
from corral.api import app, deps
from corral.domain import errors
from corral.executors import base, routing
from corral.executors.local import machine, tasks
from corral.kinds import incremental, loop, notebooks, pipelines, search
from corral.scheduler import reconciler
from corral.sdk import credentials
from corral.services import accounts, jobpaths, leasing, runtime, secretbox, sync
from corral.services import catalog as catalog_mod
from corral.storage import objects
from corral.store import db, identity_repo
from corral.web import console

log = logging.getLogger(__name__)
#: in CORRAL_HOME: what goes wrong inside the task launcher and its keepers (tracebacks),
#: which outlive the server and so do not write to its output
LAUNCHER_LOG = "launcher.log"


class AlreadyRunning(errors.CorralError):
    """Another corral server already uses this CORRAL_HOME or database."""

    error_code = "ModelArts.0409"

    def __init__(self, message: str | None = None, url: str | None = None) -> None:
        super().__init__(message)
        self.url = url


#: the running server (its threads, and the terms it leads)
Platform = running.Platform


def build(settings: settings_mod.Settings) -> Platform:
    # A home a server has used is locked first (a second server is refused at once); a
    # fresh one is made only once the executors are up, so that an unreachable cluster
    # leaves nothing behind (no admin, database or credential it would have to match).
    used = (settings.home / "server.lock").exists()
    locks: list[Any] = [_lock_home(settings)] if used else []
    try:
        # Tasks on a Ray cluster are started by its agents, as their own user allows.
        run_as = (jobpaths.task_user(settings)
                  if settings_mod.LOCAL in settings.pool_executors().values() else None)
        executor = make_executor(settings)
    except BaseException:
        for lock in locks:
            lock.close()
        raise
    times = leasing.Times(lease_ms=round(settings.leader_lease * 1000),
                             renew_ms=round(settings.leader_renew * 1000))
    # (a connection silent longer than a leader may act on one renewal is given up)
    store = db.Store(settings.db_url, pooled=settings.database_pooler,
                     dead_after=times.hold_ms / 1000)
    try:
        if not used:
            settings.home.mkdir(parents=True, exist_ok=True)
            locks.append(_lock_home(settings))
        box, project_id = _open_state(settings, store, locks)
    except BaseException:
        executor.close()
        for lock in locks:
            lock.close()
        store.dispose()
        raise
    cat = catalog_mod.Catalog.build(settings, executor.nodes(), routing.origin(executor))
    stores = objects.Stores(settings)
    ctx = deps.Context(store=store, catalog=cat, settings=settings,
                       default_project_id=project_id, box=box, stores=stores,
                       containment=(executor.containment()
                                    if isinstance(executor, base.Contains) else "none"))
    leader = leasing.Leader(store, settings.server_name or leasing.default_name(),
                            None, times, exclusive=store.is_sqlite)
    fence = leasing.Fence(leader)
    ctx.server_id = leader.me
    fenced = store.fenced(fence)

    def follow(new: catalog_mod.Catalog) -> None:  # nodes joined or left the cluster
        ctx.catalog = new

    wake = threading.Event()
    ctx.wake = wake.set
    kinds = loop.Loop(_controllers(ctx, fenced), interval=settings.tick_interval, store=store)

    def changed(job_ids: Iterable[str]) -> None:  # who waits on jobs, and their owners
        ids = list(job_ids)
        ctx.changes.changed(ids)
        kinds.jobs_changed(ids)

    def new_reconciler(guard: leasing.Fence) -> reconciler.Reconciler:
        return reconciler.Reconciler(store.fenced(guard), executor, ctx.catalog, settings,
                                     run_as=run_as, on_catalog=follow,
                                     on_change=ctx.changes.changed,
                                     on_pass_end=kinds.jobs_changed,
                                     wake=wake.set, hang_timeout=settings.hang_timeout,
                                     leading=guard.holds)

    rec_fence = leasing.Fence(leader)
    syncer = sync.Syncer(store=fenced, settings=settings, stores=stores,
                         changed=changed, wake=wake.set)
    ctx.wake_kinds = kinds.wake
    executor.set_waker(wake.set)
    return Platform(settings=settings, store=store, executor=executor, catalog=cat,
                    reconciler=new_reconciler(rec_fence), context=ctx, locks=locks,
                    syncer=syncer, kinds=kinds, wake_event=wake, leader=leader, fence=fence,
                    fenced=fenced, new_reconciler=new_reconciler, rec_fence=rec_fence)


def _controllers(services: runtime.Runtime, store: db.Store) -> list[loop.Controller]:
    """The controllers of the job kinds this server runs (when it leads), writing to
    `store` and calling the services (submitting their jobs) with `services`: the same
    runtime the API's context is."""
    return [incremental.controller_for(store, services),
            pipelines.controller_for(store, services),
            notebooks.controller_for(store, services.settings, services),
            search.controller_for(store, services)]


def _open_state(settings: settings_mod.Settings, store: db.Store,
                locks: list[Any]) -> tuple[secretbox.SecretBox, str]:
    """The server key, the migrated database, the default project and, on the first start,
    the platform admin and its credential file."""
    box = secretbox.load(settings)
    if store.is_sqlite:
        locks.append(_lock_sqlite(store))
    store.migrate()
    for name in ("corral.db", "corral.db-wal", "corral.db-shm"):
        _private(settings.home / name)
    with store.begin() as conn:
        now = int(time.time() * 1000)
        project_id = identity_repo.ensure_default_project(conn, now)
        admin = accounts.bootstrap(conn, box, project_id=project_id, now=now)
        if admin is not None:
            # Written before the commit: a credential that never reaches the database
            # is replaced at the next start; one in the database that no file holds
            # could never be used. (The CLI on this machine finds it there.)
            credentials.write(settings.credentials_file, credentials.Login(
                project_id=project_id, user=admin.user, token=admin.token,
                access_key=admin.key.access_key, secret_key=admin.key.secret_key))
            log.info("first start: created the platform admin '%s'; its credential is "
                     "in %s", admin.user, settings.credentials_file)
    return box, project_id


def _private(path: Any) -> None:
    """The state database holds sealed secrets and every project's jobs: owner only."""
    with contextlib.suppress(OSError):
        os.chmod(path, 0o600)


def make_executor(settings: settings_mod.Settings) -> base.Executor:
    """What runs the pools: this machine's processes, a Ray cluster's nodes, or several
    of them (each pool on its own, from `pools` and `ray_address`)."""
    problem = settings.pool_conflict()
    if problem:
        raise errors.CorralError(problem)
    members: dict[str, base.Executor] = {}
    try:
        for key in dict.fromkeys(settings.pool_executors().values()):
            members[key] = _executor(settings, key)
    except BaseException:
        for member in members.values():
            member.close()
        raise
    if len(members) == 1:
        return next(iter(members.values()))
    return routing.Routed(members)


def _executor(settings: settings_mod.Settings, key: str) -> base.Executor:
    address = settings_mod.ray_address_of(key)
    if address is None:
        node = machine.detect_node(cpus=settings.cpus, memory_gb=settings.memory_gb)
        return tasks.LocalExecutor(
            dataclasses.replace(node, accelerators=catalog_mod.local_accelerators(settings)),
            cgroups_mode=settings.task_cgroups, log_max_mb=settings.task_log_max_mb,
            errors_to=settings.home / LAUNCHER_LOG)
    if importlib.util.find_spec("ray") is None:
        raise errors.CorralError(f"a pool runs on the Ray cluster at {address} but Ray is "
                                 "not installed; install corral[ray]")
    from corral.executors.ray import bridge

    return bridge.RayBridge(bridge.Options(
        address=address, namespace=settings.ray_namespace, run_as=settings.run_as,
        connect_timeout=settings.ray_connect_timeout, lost_after=settings.ray_lost_after,
        shared_fs=settings.ray_shared_fs))


def _lock_home(settings: settings_mod.Settings) -> IO[str]:
    """A SQLite server holds its home alone; servers on PostgreSQL may share one (its run
    folders, where the next leader on this machine finds the tasks the last one started),
    but not with a SQLite server."""
    sqlite = settings.db_url.startswith("sqlite")
    fh = open(settings.home / "server.lock", "a+")  # noqa: SIM115 - held for the server's life
    try:
        fcntl.flock(fh, (fcntl.LOCK_EX if sqlite else fcntl.LOCK_SH) | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.close()
        url = _running_url(settings)
        raise AlreadyRunning(
            f"another corral server is running with CORRAL_HOME={settings.home}"
            + (f" at {url}" if url else "")
            + (": a SQLite database serves one server at a time; to run several, keep "
               "the state in PostgreSQL (docs/high-availability.md)" if sqlite else
               ": it keeps its state in SQLite, which serves one server at a time"),
            url=url) from None
    return fh


def _lock_sqlite(store: db.Store) -> IO[str]:
    """The lock beside a SQLite database: a second server on the same file (from another
    home) is refused, plainly."""
    path = store.engine.url.database
    if not path or path == ":memory:":
        return open(os.devnull)
    fh = open(f"{path}.lock", "a+")  # noqa: SIM115 - held for the server's life
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.close()
        raise AlreadyRunning(
            f"another corral server is using the SQLite database {path}: SQLite serves one "
            "server at a time; to run several, keep the state in PostgreSQL "
            "(docs/high-availability.md)") from None
    return fh


def _running_url(settings: settings_mod.Settings) -> str | None:
    try:
        return str(json.loads((settings.home / "server.json").read_text())["url"])
    except (OSError, ValueError, KeyError):
        return None


def _write_server_file(settings: settings_mod.Settings, url: str) -> None:
    (settings.home / "server.json").write_text(json.dumps({"url": url, "pid": os.getpid()}))


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted connections inherit this: without it a response written as headers + body
    # waits ~40 ms for the client's delayed ACK (Nagle's algorithm).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise errors.CorralError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.listen(2048)
    return sock


def _bind_notebooks(settings: settings_mod.Settings, asked: int, taken: int) -> socket.socket:
    """The notebooks' port, an origin of their own (api/notebook_proxy.py): `notebook_port`
    when set (a failure to take it is an error), else the port after the API's, else (that
    one in use, or the API's port chosen by the system) any free one. A second server
    started on the port after the first's, or a test's server on a port the system picked,
    must not fail for a default it never asked for."""
    if settings.notebook_port is not None:
        return _bind(settings.host, settings.notebook_port)
    if asked:
        try:
            return _bind(settings.host, taken + 1)
        except errors.CorralError as exc:
            log.warning("notebooks: %s; taking any free port instead (set notebook_port to "
                        "choose one)", exc.message)
    return _bind(settings.host, 0)


def _open(settings: settings_mod.Settings, port: int,
          ) -> tuple[Platform, list[socket.socket], str]:
    """Build the platform and take the ports (the API's, then the notebooks'); `_start`
    starts it."""
    platform = build(settings)
    socks: list[socket.socket] = []
    try:
        socks.append(_bind(settings.host, port))
        taken = socks[0].getsockname()[1]
        socks.append(_bind_notebooks(settings, port, taken))
    except errors.CorralError as exc:
        for sock in socks:
            sock.close()
        platform.stop()  # releases the home lock: nothing runs here after all
        if len(socks) == 1:
            raise errors.CorralError(f"notebooks (notebook_port): {exc.message}") from None
        raise
    platform.context.notebook_port = socks[1].getsockname()[1]
    return platform, socks, f"http://{settings.host}:{taken}"


def _start(platform: Platform, url: str) -> None:
    """Say where the server listens and start the platform's threads (its lease first).
    The caller stops it, however this ends."""
    _write_server_file(platform.settings, url)
    platform.leader.url = url
    platform.start()


def _uvicorn(platform: Platform) -> uvicorn.Server:
    config = uvicorn.Config(console.wrap(app.create_app(platform.context)), log_level="warning",
                            access_log=False, lifespan="off", timeout_graceful_shutdown=3)
    return uvicorn.Server(config)


def serve(settings: settings_mod.Settings) -> None:
    """`corral server`: run in the foreground until SIGINT/SIGTERM, then stop gracefully
    and return (`_StopSignals`)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: "
                        "%(message)s")
    logging.getLogger("alembic").setLevel(logging.WARNING)
    signals = _StopSignals()
    with signals.installed():
        platform, socks, url = _open(settings, settings.port)
        # From here a signal is a graceful stop: the lease the start takes is given up.
        signals.running = True
        try:
            _start(platform, url)
            http = _uvicorn(platform)
            signals.serving(http)
            log.info("corral %s serving on %s (state: %s, home: %s)", _version(), url,
                     platform.store.engine.dialect.name, settings.home)
            # What start-up made (some 140,000 objects: the app, its schemas, SQLAlchemy's
            # tables) stays for the server's life: out of the collector's sight, a full
            # collection, which runs as long-lived objects grow and holds every thread
            # meanwhile, takes microseconds instead of about 90 ms. (Not for an embedded
            # server: its process is someone else's.)
            gc.collect()
            gc.freeze()
            http.run(sockets=socks)
        finally:
            signals.stopping()
            platform.stop()
            for sock in socks:
                sock.close()
            log.info("corral stopped%s; running jobs keep running and are adopted at next "
                     "start", f" on {signals.name}" if signals.name else "")


class _StopSignals:
    """SIGTERM and SIGINT as a graceful stop of `corral server`.

    uvicorn handles both while it serves, but then puts back the handlers it found and
    raises the signal again; with the defaults found, SIGTERM would kill the process before
    the platform stops (its leadership lease kept until it expires, nothing logged). These
    handlers are the ones it finds. From the moment the platform starts (before it takes its
    lease), a signal only notes that the server is to stop and tells uvicorn so; the
    platform's stop then runs, and the command exits 0. Before (opening the database,
    taking the ports), a signal ends the start-up where it is (exit status 128 + its number);
    while the platform stops, it ends the process at once, as it does by default.
    """

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self) -> None:
        self.name = ""  #: the signal the server stopped on, by name
        self.running = False  #: the platform has started
        self._http: uvicorn.Server | None = None
        self._stopping = False

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield  # (signals reach the main thread only: its caller handles them)
            return
        before = {sig: signal.signal(sig, self._received) for sig in self.SIGNALS}
        try:
            yield
        finally:
            for sig, handler in before.items():
                signal.signal(sig, handler)

    def serving(self, http: uvicorn.Server) -> None:
        """uvicorn serves next (and stops at once if a signal came already)."""
        self._http = http
        http.should_exit = bool(self.name)

    def stopping(self) -> None:
        self._stopping = True

    def _received(self, signum: int, _frame: types.FrameType | None) -> None:
        if not self.running:
            raise SystemExit(128 + signum)
        if self._stopping:
            signal.signal(signum, signal.SIG_DFL)
            signal.raise_signal(signum)
            return
        self.name = self.name or signal.Signals(signum).name
        if self._http is not None:
            self._http.should_exit = True


@dataclasses.dataclass
class Embedded:
    """A server running in a thread of this process (for `corral demo` and tests)."""

    url: str
    platform: Platform
    _server: uvicorn.Server
    _thread: threading.Thread
    _socks: list[socket.socket]

    @property
    def notebook_url(self) -> str:
        """Where its notebooks are served (api/notebook_proxy.py)."""
        return self.url.rsplit(":", 1)[0] + f":{self.platform.context.notebook_port}"

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self.platform.stop()
        for sock in self._socks:
            sock.close()


def start_embedded(settings: settings_mod.Settings, port: int = 0) -> Embedded:
    platform, socks, url = _open(settings, port)
    try:
        _start(platform, url)
    except BaseException:
        platform.stop()
        for sock in socks:
            sock.close()
        raise
    server = _uvicorn(platform)
    thread = threading.Thread(target=server.run, kwargs={"sockets": socks},
                              name="corral-http", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.01)
    return Embedded(url=url, platform=platform, _server=server, _thread=thread, _socks=socks)


def _version() -> str:
    import corral

    return corral.__version__
