"""What the API needs from the running platform, handed in by the server at start-up."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import functools
import time
from collections.abc import Callable, Iterator
from typing import Annotated, ParamSpec, TypeVar

import sqlalchemy as sa
from fastapi import Depends, Request

from corral import settings as settings_mod
from corral.api import authcache, watch
from corral.domain import pacing, specs
from corral.services import catalog as catalog_mod
from corral.services import secretbox, submit
from corral.storage import objects, paths
from corral.store import db, identity_repo

T = TypeVar("T")
P = ParamSpec("P")
#: threads of the API's own pool (see Context.blocking), at most
API_THREADS = 32
#: what all log streams of a server send per second at most, together (api/streams.py):
#: 100 streams of a flooding log at 1 MiB/s each kept /healthz waiting for a second
LOG_BYTES_PER_S = 32 * 1024 * 1024


@dataclasses.dataclass
class Context:
    store: db.Store
    catalog: catalog_mod.Catalog
    settings: settings_mod.Settings
    default_project_id: str
    #: seals and opens stored secret keys (None only where nothing verifies signatures)
    box: secretbox.SecretBox | None = None
    #: the object stores s3:// URLs resolve to (versions and models: issue 6)
    stores: objects.Stores | None = None
    #: how the executors hold each task's processes together (`corral info`)
    containment: str = "none"
    #: asks the scheduler for a pass at once (a job submitted, stopped or deleted, a quota)
    wake: Callable[[], None] = lambda: None
    #: asks the job kinds' controllers for a pass (a user acted on one of their objects)
    wake_kinds: Callable[[], None] = lambda: None
    clock: Callable[[], float] = time.time
    #: this server as a leadership lease names it (services/leasing.identity)
    server_id: str = ""
    #: the port notebooks are served on (None: nowhere; api/notebook_proxy.py)
    notebook_port: int | None = None
    #: who waits on which job (GET .../training-jobs/{id}?watch=...), told of changes
    changes: watch.JobChanges = dataclasses.field(default_factory=watch.JobChanges)
    #: what the log streams may still send, all together (api/streams.py)
    log_rate: pacing.Rate = dataclasses.field(
        default_factory=lambda: pacing.Rate(LOG_BYTES_PER_S))
    #: credentials verified in the last few seconds (api/authcache.py)
    auth_cache: authcache.CredentialCache = dataclasses.field(init=False)
    #: where `blocking` runs what it is given (threads are started as needed)
    threads: concurrent.futures.ThreadPoolExecutor = dataclasses.field(
        default_factory=lambda: concurrent.futures.ThreadPoolExecutor(
            API_THREADS, thread_name_prefix="corral-api"), init=False)
    _policies: dict[str, paths.Policy] = dataclasses.field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self.auth_cache = authcache.CredentialCache(self.settings.auth_cache_seconds)

    def now(self) -> int:
        return int(self.clock() * 1000)

    async def blocking(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """`fn(*args)` on a thread of the API's own pool, for a handler whose work blocks
        (the database). The handlers every job meets (its submission, reading it, watching
        it) are `async` and hand their work over through this: a plain executor's hop costs
        about a third of what anyio's does, the one FastAPI takes for `def` handlers."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.threads, functools.partial(fn, *args, **kwargs))

    @contextlib.contextmanager
    def credentials_change(self) -> Iterator[sa.Connection]:
        """A write transaction that changes who may do what (a revoked key or token, a
        disabled user, a changed membership): credentials verified before it are forgotten
        once it has committed, before the change is answered."""
        try:
            with self.store.begin() as conn:
                yield conn
        finally:
            self.auth_cache.clear()

    @property
    def places(self) -> submit.Places:
        return submit.Places(runs_dir=self.settings.runs_dir, stores=self.stores,
                             model_channel=self.settings.model_channel)

    def submit_owned(self, conn: sa.Connection, body: specs.JobCreate, *, project_id: str,
                     user_name: str, now: int, owner: tuple[str, str, str]) -> str:
        """Submit a job an object of a job kind owns as the API submits any job
        (`kinds.owned.Submit`): how such objects are checked when they are made."""
        return submit.create_job(conn, self.catalog, body, project_id=project_id, now=now,
                                 user_name=user_name, policy=self.path_policy(conn, project_id),
                                 places=self.places, owner=owner)

    def path_policy(self, conn: sa.Connection, project_id: str) -> paths.Policy:
        """Where the project's jobs may read and write on local disk (storage/paths.py).

        Kept per project: it depends only on the settings and the project's name, and a
        project is never renamed or removed (building it resolves every root on disk).
        """
        policy = self._policies.get(project_id)
        if policy is None:
            policy = self._policies[project_id] = paths.policy_for(
                self.settings, project_id=project_id,
                project_name=identity_repo.find_project(conn, project_id).name,
                is_default=project_id == self.default_project_id)
        return policy


async def get_context(request: Request) -> Context:
    # async: FastAPI runs a plain function dependency in its thread pool, a hop that costs
    # more than this whole lookup
    ctx: Context = request.app.state.context
    return ctx


Ctx = Annotated[Context, Depends(get_context)]
