"""What the API needs from the running platform, handed in by the server at start-up."""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import functools
from collections.abc import Callable
from typing import Annotated, ParamSpec, TypeVar

from fastapi import Depends, Request
from starlette.datastructures import URL

from corral.api import authcache, watch
from corral.domain import pacing
from corral.services import runtime, tensorboards

T = TypeVar("T")
P = ParamSpec("P")
#: threads of the API's own pool (see Context.blocking), at most
API_THREADS = 32
#: what all log streams of a server send per second at most, together (api/streams.py):
#: 100 streams of a flooding log at 1 MiB/s each kept /healthz waiting for a second
LOG_BYTES_PER_S = 32 * 1024 * 1024


@dataclasses.dataclass
class Context(runtime.Runtime):
    """The services' runtime, and what the API alone keeps beside it."""

    #: how the executors hold each task's processes together (`corral info`)
    containment: str = "none"
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
    #: the jobs' TensorBoards this server runs (api/tensorboard_proxy.py)
    tensorboards: tensorboards.Boards = dataclasses.field(init=False)
    #: where `blocking` runs what it is given (threads are started as needed)
    threads: concurrent.futures.ThreadPoolExecutor = dataclasses.field(
        default_factory=lambda: concurrent.futures.ThreadPoolExecutor(
            API_THREADS, thread_name_prefix="corral-api"), init=False)

    def __post_init__(self) -> None:
        self.auth_cache = authcache.CredentialCache(self.settings.auth_cache_seconds)
        self.tensorboards = tensorboards.Boards(self.settings, self.store)

    async def blocking(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """`fn(*args)` on a thread of the API's own pool, for a handler whose work blocks
        (the database). The handlers every job meets (its submission, reading it, watching
        it) are `async` and hand their work over through this: a plain executor's hop costs
        about a third of what anyio's does, the one FastAPI takes for `def` handlers."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.threads, functools.partial(fn, *args, **kwargs))

    def notebook_origin(self, url: URL) -> str:
        """Where browsers reach the notebooks and the jobs' TensorBoards (api/notebook_proxy.py,
        api/tensorboard_proxy.py): `notebook_url`, else the host name `url` was sent to, on
        the notebooks' port."""
        if self.settings.notebook_url:
            return self.settings.notebook_url.rstrip("/")
        port = self.notebook_port if self.notebook_port is not None else url.port
        return str(url.replace(port=port, path="", query="", fragment="")).rstrip("/")

    def forget_credentials(self) -> None:
        """Credentials verified before a change to who may do what (services/accounts.py)
        are verified again."""
        self.auth_cache.clear()


async def get_context(request: Request) -> Context:
    # async: FastAPI runs a plain function dependency in its thread pool, a hop that costs
    # more than this whole lookup
    ctx: Context = request.app.state.context
    return ctx


Ctx = Annotated[Context, Depends(get_context)]
