"""A notebook's session: the training job that runs its JupyterLab, and the folders it uses.

The job runs JupyterLab from the notebook's engine (through `labstart.py`), listening on a
unix socket whose path the server chose (`sockets.py`: `$CORRAL_HOME/jupyter/`), from the
moment the server has taken it as its own, under the base URL
`/notebooks/<id>/` that the server's proxy forwards, in the notebook's workspace.
JupyterLab has no token and no password: nobody but the server can connect to that socket
once the server has taken it, and the server's proxy is where users are authenticated.
JupyterLab's runtime files (its kernels' connection files, what it writes about itself)
go into the session's `runtime/` folder, the task user's; the server reads none of them.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import pathlib
import random
import secrets
import shlex
import shutil

from corral import settings as settings_mod
from corral.domain import errors, notebooks, specs
from corral.kinds.notebooks import labstart, sockets
from corral.oskit import beneath
from corral.services import catalog as catalog_mod
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


def sockets_dir(settings: settings_mod.Settings) -> pathlib.Path:
    return settings.home / "jupyter"


def socket_path(settings: settings_mod.Settings, nb: kind_rows.Notebook) -> pathlib.Path:
    """Where the session's JupyterLab listens: a path the server chose (a longer one than a
    unix socket's address holds is reached through its folder: `sockets.address`)."""
    return sockets_dir(settings) / f"{_short(nb.id)}-{nb.session}.sock"


def socket_pattern(notebook_id: str) -> str:
    """The names of all the notebook's sessions' sockets, as a glob."""
    return f"{_short(notebook_id)}-*.sock"


def _short(notebook_id: str) -> str:
    return hashlib.sha256(notebook_id.encode()).hexdigest()[:16]


def prepare(settings: settings_mod.Settings, nb: kind_rows.Notebook,
            owner: tuple[int, int] | None) -> pathlib.Path:
    """Make the workspace (where missing, the task user's: `owner`, None: the server's), a
    fresh folder for the session (the server's, with a `runtime/` folder of the task
    user's) and the sockets' folder; the session's folder."""
    beneath.make_dirs(nb.workspace, owner)
    beneath.make_dirs(state_dir(settings, nb.id))
    folder = session_dir(settings, nb)
    for old in state_dir(settings, nb.id).glob("session-*"):
        if old != folder:  # an ended session's runtime files
            shutil.rmtree(old, ignore_errors=True)
    sockets.remove(sockets_dir(settings), socket_pattern(nb.id))
    beneath.make_dirs(folder)
    _own(folder, None, 0o755)  # a folder a job made or changed there is the server's again
    beneath.make_dirs(folder / "runtime", owner)
    _own(folder / "runtime", owner, 0o700)
    sockets.prepare(sockets_dir(settings))
    return folder


def _own(path: pathlib.Path, owner: tuple[int, int] | None, mode: int) -> None:
    fd = beneath.open_dir(path)
    try:
        os.fchown(fd, *(owner or (os.geteuid(), os.getegid())))
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


#: the ports a session on a Ray node may listen on, one chosen at random for each session:
#: below Linux's default ip_local_port_range (32768-60999), from which the node's outgoing
#: connections (Ray's own, a job's) take their ports, and above Ray's workers' (10002-19999)
TCP_PORTS = (20000, 32767)
#: the file in a Ray session's runtime folder that holds its JupyterLab's token
TOKEN_FILE = "corral-jupyter-token"


def remote(cat: catalog_mod.Catalog, pool_id: str | None) -> bool:
    """Whether the pool's sessions run on other machines (a Ray cluster): their JupyterLab
    is then reached over TCP, with a token, rather than on a unix socket here."""
    return cat.executor_of(cat.pool(pool_id))["executor"] != settings_mod.LOCAL


def tcp_session() -> tuple[int, str]:
    """A new remote session's port and JupyterLab token (the notebook's `port` and
    `jupyter_token`)."""
    return random.randint(*TCP_PORTS), new_secret()


def write_token(settings: settings_mod.Settings, nb: kind_rows.Notebook,
                owner: tuple[int, int] | None) -> None:
    """The session's JupyterLab token, in a file of the task user's (0600) in its runtime
    folder, where labstart.py reads it: never in the job's command line or environment,
    which its job's record shows."""
    assert nb.jupyter_token
    token = nb.jupyter_token.encode()
    fd = beneath.open_dir(session_dir(settings, nb) / "runtime")
    try:
        beneath.replace(fd, TOKEN_FILE, lambda f: beneath.write_all(f, token), mode=0o600)
        if owner is not None:
            os.chown(TOKEN_FILE, *owner, dir_fd=fd, follow_symlinks=False)
    finally:
        os.close(fd)


def job_body(settings: settings_mod.Settings, cat: catalog_mod.Catalog,
             nb: kind_rows.Notebook) -> specs.JobCreate:
    """The session job: JupyterLab in the workspace, at the notebook's flavor and pool,
    with the priority of interactive work."""
    engine = cat.engine(specs.Engine(engine_id=nb.image_id))
    folder = session_dir(settings, nb)
    if nb.port is not None:  # on a Ray node: over TCP, with its token
        argv = tcp_lab_argv(engine.python, folder / "runtime" / TOKEN_FILE, nb.port,
                            base_url(nb.id), nb.workspace)
    else:
        argv = lab_argv(engine.python, socket_path(settings, nb), base_url(nb.id),
                        nb.workspace)
    env = {"JUPYTER_RUNTIME_DIR": str(folder / "runtime")}
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


def lab_argv(python: str, sock: pathlib.Path, url: str, workspace: str, *,
             server_uid: int | None = None) -> list[str]:
    """JupyterLab's command line: listening on `sock` only once the server (this process's
    user unless told) has taken it (labstart.py), under the base URL `url`, in
    `workspace`."""
    uid = os.geteuid() if server_uid is None else server_uid
    return [python, "-c", _labstart(), str(uid), "--no-browser",
            f"--ServerApp.sock={sock}", "--ServerApp.sock_mode=0600",
            # No token, no password, no XSRF check of its own: only the server reaches
            # the socket, and its proxy authenticates users and checks where a request
            # comes from (api/notebook_proxy.py). So no credential of JupyterLab's is in
            # its pages, in a file, or anywhere a browser or a job could take it from.
            "--IdentityProvider.token=", "--ServerApp.password_required=False",
            "--ServerApp.disable_check_xsrf=True",
            f"--ServerApp.base_url={url}", f"--ServerApp.root_dir={workspace}",
            "--ServerApp.allow_root=True"]


def tcp_lab_argv(python: str, token_file: pathlib.Path, port: int, url: str,
                 workspace: str) -> list[str]:
    """JupyterLab's command line on a Ray node: on `port` of every address of the node,
    asking every request for the token in `token_file` (labstart.py reads it), under the
    base URL `url`, in `workspace`."""
    return [python, "-c", _labstart(), f"tcp:{token_file}", "--no-browser",
            "--ServerApp.ip=0.0.0.0", f"--ServerApp.port={port}",
            "--ServerApp.port_retries=0", "--ServerApp.password_required=False",
            # corral's proxy checks where a browser's request comes from; its own
            # requests carry the token, which JupyterLab's XSRF check lets through.
            "--ServerApp.disable_check_xsrf=True",
            f"--ServerApp.base_url={url}", f"--ServerApp.root_dir={workspace}",
            "--ServerApp.allow_root=True"]


@functools.cache
def _labstart() -> str:
    return pathlib.Path(labstart.__file__).read_text()


def workspace_for(project_home: pathlib.Path, notebook_id: str,
                  volume: notebooks.VolumeReq) -> pathlib.Path:
    """Where a new notebook's workspace is: its own folder in the project's tree, or the
    folder a DEDICATED volume names."""
    if volume.ownership == "DEDICATED":
        assert volume.uri is not None
        return pathlib.Path(volume.uri)
    return project_home / "notebooks" / notebook_id
