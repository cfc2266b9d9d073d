"""A notebook's session: the training job that runs its JupyterLab, and the files it reads.

The job runs `python -m jupyterlab` from the notebook's engine, bound to 127.0.0.1 on its
node, on a port the system gives it, under the base URL `/notebooks/<id>/` that the
server's proxy forwards, in the notebook's workspace. JupyterLab reads its token from a
file the controller writes for the session (so that the token is in no job spec, argv or
environment anyone can read) and writes where it listens into the session's folder
(`$CORRAL_HOME/notebooks/<id>/session-<n>/`), where the controller reads the port.
"""

from __future__ import annotations

import importlib.util
import os
import pathlib
import secrets
import shlex
import shutil

from corral import settings as settings_mod
from corral.domain import errors, notebooks, specs
from corral.scheduler import catalog as catalog_mod
from corral.storage import nofollow
from corral.store import kind_rows


def role(session: int) -> str:
    """The role of a notebook's session job (`owner_role`)."""
    return f"session-{session}"


def base_url(notebook_id: str) -> str:
    return f"/notebooks/{notebook_id}/"


def state_dir(settings: settings_mod.Settings, notebook_id: str) -> pathlib.Path:
    return settings.home / "notebooks" / notebook_id


def session_dir(settings: settings_mod.Settings, nb: kind_rows.Notebook) -> pathlib.Path:
    return state_dir(settings, nb.id) / role(nb.session)


def new_secret() -> str:
    return secrets.token_urlsafe(32)


def check_engine(cat: catalog_mod.Catalog, image_id: str) -> None:
    """BadParameter unless `image_id` names an engine that can run JupyterLab: one the
    catalog has, and for the server's own Python, one with JupyterLab installed."""
    engine = cat.engine(specs.Engine(engine_id=image_id))
    if engine.engine_id == cat.engines[0].engine_id and (
            importlib.util.find_spec("jupyterlab") is None):
        raise errors.BadParameter(
            f"image_id '{image_id}': JupyterLab is not installed beside corral; install "
            "corral[notebook], or name an engine that has it")


def prepare(settings: settings_mod.Settings, nb: kind_rows.Notebook,
            owner: tuple[int, int] | None) -> pathlib.Path:
    """Make the workspace (where missing) and a fresh folder for the session, holding its
    JupyterLab token, both the task user's (`owner`, None: the server's); the folder."""
    nofollow.make_dirs(nb.workspace, owner)
    nofollow.make_dirs(state_dir(settings, nb.id))
    folder = session_dir(settings, nb)
    for old in state_dir(settings, nb.id).glob("session-*"):
        if old != folder:  # an ended session's token and runtime files
            shutil.rmtree(old, ignore_errors=True)
    nofollow.make_dirs(folder, owner)
    assert nb.jupyter_token is not None
    token = nb.jupyter_token.encode()

    def fill(fd: int) -> None:
        nofollow.write_all(fd, token)
        if owner is not None:
            os.fchown(fd, *owner)

    fd = nofollow.open_dir(folder)
    try:
        nofollow.replace(fd, "token", fill, mode=0o600)
    finally:
        os.close(fd)
    return folder


def job_body(settings: settings_mod.Settings, cat: catalog_mod.Catalog,
             nb: kind_rows.Notebook) -> specs.JobCreate:
    """The session job: JupyterLab in the workspace, at the notebook's flavor and pool,
    with the priority of interactive work."""
    engine = cat.engine(specs.Engine(engine_id=nb.image_id))
    folder = session_dir(settings, nb)
    argv = [engine.python, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
            "--ServerApp.port=0", "--ServerApp.port_retries=0",
            f"--ServerApp.base_url={base_url(nb.id)}", f"--ServerApp.root_dir={nb.workspace}",
            "--ServerApp.allow_root=True"]
    env = {
        # A JUPYTER_TOKEN of the server's environment would win over the file.
        "JUPYTER_TOKEN": "", "JUPYTER_TOKEN_FILE": str(folder / "token"),
        "JUPYTER_RUNTIME_DIR": str(folder),
    }
    return specs.JobCreate.model_validate({
        "kind": "job",
        "metadata": {"name": "session", "description": f"JupyterLab of notebook {nb.name}"},
        "algorithm": {"command": shlex.join(argv), "engine": {"engine_id": nb.image_id},
                      "environments": env, "working_dir": nb.workspace},
        "spec": {"resource": {"flavor_id": nb.flavor_id, "node_count": 1,
                              "pool_id": nb.pool_id},
                 "schedule_policy": {"priority": settings.notebook_priority,
                                     "preemptible": False},
                 # An unused notebook is quiet: its own leases stop it, never the
                 # scheduler's hang detection.
                 "fault_tolerance": {"hang_timeout": 0}},
    })


def workspace_for(project_home: pathlib.Path, notebook_id: str,
                  volume: notebooks.VolumeReq) -> pathlib.Path:
    """Where a new notebook's workspace is: its own folder in the project's tree, or the
    folder a DEDICATED volume names."""
    if volume.ownership == "DEDICATED":
        assert volume.uri is not None
        return pathlib.Path(volume.uri)
    return project_home / "notebooks" / notebook_id
