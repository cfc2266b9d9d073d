"""Where a project's jobs may read and write on this machine: the one check, made at
submit and again where the server uses a path (a job may have put a link in it since).

Every local path a job names (code_dir, inputs, outputs, working_dir, log_export_path) is
resolved (symlinks followed, `..` collapsed) and must then lie under a root the project
may use:

- its own tree, `$CORRAL_HOME/projects/<project id>/`, always;
- the `storage.roots` every project shares, and its own `storage.projects.<name or id>`;
- for the default project without roots of its own (and `open_default_project`, the
  default): any path outside CORRAL_HOME, which is the single-user embedded setup.

Nothing else under CORRAL_HOME (the database, the server key, the login file, other jobs'
runs, other projects' trees) and neither the server key file nor the config file is ever
allowed, whatever the roots say. URLs with a scheme (s3://, obs://) are not local paths
and are left to the storage that handles them.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib

from corral import settings as settings_mod
from corral.domain import errors


@dataclasses.dataclass(frozen=True)
class Policy:
    home: pathlib.Path
    #: where the project may read and write (resolved)
    roots: tuple[pathlib.Path, ...]
    #: any path outside `home` is allowed too (the open default project)
    open: bool = False
    #: never allowed, even under a root (resolved)
    forbidden: tuple[pathlib.Path, ...] = ()

    def describe(self) -> str:
        if self.open:
            return "any path outside CORRAL_HOME"
        return ", ".join(str(r) for r in self.roots)


def _real(path: str | os.PathLike[str]) -> pathlib.Path:
    return pathlib.Path(os.path.realpath(os.path.expanduser(path)))


def _under(path: pathlib.Path, root: pathlib.Path) -> bool:
    return path == root or path.is_relative_to(root)


def project_home(settings: settings_mod.Settings, project_id: str) -> pathlib.Path:
    return settings.home / "projects" / project_id


def policy_for(settings: settings_mod.Settings, *, project_id: str, project_name: str,
               is_default: bool) -> Policy:
    cfg = settings.storage
    own = [r for key in (project_id, project_name) for r in cfg.projects.get(key, [])]
    roots: list[str | pathlib.Path] = [project_home(settings, project_id), *cfg.roots, *own]
    if is_default:
        roots.append(settings.home / "demo")  # where `corral demo` writes its model
    forbidden: list[pathlib.Path] = [settings.key_file]
    if settings.config is not None:
        forbidden.append(settings.config)
    return Policy(home=_real(settings.home), roots=tuple(_real(r) for r in roots),
                  open=is_default and not own and cfg.open_default_project,
                  forbidden=tuple(_real(f) for f in forbidden))


def confine(policy: Policy, path: str | os.PathLike[str], what: str) -> pathlib.Path:
    """The resolved path, or BadParameter when the project may not use it."""
    real = _real(path)
    allowed = any(_under(real, root) for root in policy.roots) or (
        policy.open and not _under(real, policy.home))
    if not allowed or any(_under(real, f) for f in policy.forbidden):
        shown = f"'{path}'" + (f" (resolves to '{real}')" if str(real) != str(path) else "")
        raise errors.BadParameter(
            f"{what} {shown} is outside the storage this project may use "
            f"({policy.describe()})")
    return real
