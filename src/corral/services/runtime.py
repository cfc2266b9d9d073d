"""What the services need of the running server, built once in the composition root.

server.py builds one `Runtime` and hands it to every driver: the API (whose `Context` is a
Runtime with the API's own parts added) and the job kinds' controllers, which call the
services with it directly (`kinds/owned.py` submits their jobs through
`services.submit.create_job` as the API does). It holds the catalog as the executors last
described it (the server replaces it as nodes come and go), each project's storage roots,
and the wake-ups of the scheduler and of the kinds' controllers.
"""

from __future__ import annotations

import contextlib
import dataclasses
import pathlib
import time
from collections.abc import Callable, Iterator

import sqlalchemy as sa

from corral import settings as settings_mod
from corral.domain import specs
from corral.services import catalog as catalog_mod
from corral.services import secretbox, submit
from corral.storage import objects, paths
from corral.store import db, identity_repo


@dataclasses.dataclass
class Runtime:
    store: db.Store
    catalog: catalog_mod.Catalog
    settings: settings_mod.Settings
    default_project_id: str
    #: seals and opens stored secret keys (None only where nothing verifies signatures)
    box: secretbox.SecretBox | None = None
    #: the object stores s3:// URLs resolve to (versions and models: issue 6)
    stores: objects.Stores | None = None
    #: asks the scheduler for a pass at once (a job submitted, stopped or deleted, a quota)
    wake: Callable[[], None] = lambda: None
    #: asks the job kinds' controllers for a pass (a user acted on one of their objects)
    wake_kinds: Callable[[], None] = lambda: None
    clock: Callable[[], float] = time.time
    _policies: dict[str, paths.Policy] = dataclasses.field(default_factory=dict, init=False)

    def now(self) -> int:
        return int(self.clock() * 1000)

    @property
    def places(self) -> submit.Places:
        return submit.Places(runs_dir=self.settings.runs_dir, stores=self.stores,
                             model_channel=self.settings.model_channel)

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

    def forget_credentials(self) -> None:
        """Told when a change to who may do what has ended: a driver that keeps verified
        credentials for a while (the API's Context) forgets them here."""

    @contextlib.contextmanager
    def credentials_change(self) -> Iterator[sa.Connection]:
        """A write transaction that changes who may do what (a revoked key or token, a
        disabled user, a changed membership): `forget_credentials` once it has ended,
        committed or not, before the change is answered."""
        try:
            with self.store.begin() as conn:
                yield conn
        finally:
            self.forget_credentials()

    def submit_job(self, conn: sa.Connection, body: specs.JobCreate, *, project_id: str,
                   user_name: str, now: int, owner: tuple[str, str, str] | None = None,
                   ) -> str:
        """`services.submit.create_job` with this server's catalog, the project's storage
        roots and the places jobs' files go: the checks every job gets (its flavor, pool and
        engine, its paths), whoever submits it. A job's id, or errors.CorralError."""
        return submit.create_job(conn, self.catalog, body, project_id=project_id, now=now,
                                 user_name=user_name, policy=self.path_policy(conn, project_id),
                                 places=self.places, owner=owner)

    def confine(self, conn: sa.Connection, project_id: str, path: str,
                what: str) -> pathlib.Path:
        """`path` resolved, or errors.BadParameter when the project may not use it: where
        the files a controller reads and writes for its jobs (their data, their models)
        may be, the same roots as its jobs' own paths."""
        return paths.confine(self.path_policy(conn, project_id), path, what)
