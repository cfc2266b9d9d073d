"""The paths a job named, checked again as they are used, and the user its tasks run as.

A job may have put a link in a folder it can write since it was submitted: every local path
it named is checked against its project's storage roots (storage/paths.py) when corral uses
it (staging its inputs, preparing an attempt, exporting its outputs), and a folder corral
made for it in its run directory is taken by its real path only if it is still there.
"""

from __future__ import annotations

import logging
import os
import pathlib
import pwd

from corral import settings as settings_mod
from corral.domain import errors
from corral.storage import paths as storage_paths  # `paths` names a job's RunPaths here
from corral.storage import runs
from corral.store import db, identity_repo

log = logging.getLogger(__name__)


def task_user(settings: settings_mod.Settings, *, quiet: bool = False,
              ) -> tuple[int, int] | None:
    """(uid, gid) tasks run as: `run_as` when the server runs as root, else None (its own).

    A root server without `run_as` runs tasks as root, and says so once in its log
    (unless `quiet`: it was said already).
    """
    if settings.run_as is None:
        if os.geteuid() == 0 and not quiet:
            log.warning("corral runs as root and no run_as user is set: jobs run as root")
        return None
    try:
        pw = pwd.getpwnam(settings.run_as)
    except KeyError:
        raise errors.CorralError(f"run_as: there is no user '{settings.run_as}'") from None
    if pw.pw_uid == os.geteuid():
        return None
    if os.geteuid() != 0:
        raise errors.CorralError(
            f"run_as '{settings.run_as}' needs the server to run as root")
    return pw.pw_uid, pw.pw_gid


class Policies:
    """Each project's storage roots (storage/paths.py), to check the paths a job named
    again when they are used: a job may have put a link in one since it was submitted.

    Kept per project: a policy depends only on the settings and the project's name, and a
    project is never renamed or removed.
    """

    def __init__(self, store: db.Store, settings: settings_mod.Settings) -> None:
        self.store = store
        self.settings = settings
        self._known: dict[str, storage_paths.Policy] = {}

    def of(self, project_id: str) -> storage_paths.Policy:
        policy = self._known.get(project_id)
        if policy is None:
            with self.store.read() as conn:
                name = identity_repo.find_project(conn, project_id).name
                default = identity_repo.default_project(conn)
            policy = self._known[project_id] = storage_paths.policy_for(
                self.settings, project_id=project_id, project_name=name,
                is_default=project_id == default)
        return policy


def named(policy: storage_paths.Policy | None, path: str | os.PathLike[str],
          what: str) -> pathlib.Path:
    """The real path of a local path a job named, checked against its project's roots
    (`policy`) now, as it is used; what is done with it then must not follow a link."""
    if policy is None:
        return pathlib.Path(os.path.realpath(path))
    return storage_paths.confine(policy, path, what)


def own(paths: runs.RunPaths, path: str) -> pathlib.Path:
    """The real path of a folder corral made for the job in its run directory (where a
    remote code_dir, input or output is kept), which no job can have replaced by a link:
    only the runs directory may be one (the administrator's)."""
    real = pathlib.Path(os.path.realpath(path))
    if not real.is_relative_to(paths.job_dir):
        raise errors.LaunchError(f"'{path}' is not in the job's run directory")
    return real
