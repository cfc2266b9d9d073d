"""Nobody on the machine but the server reaches a notebook's JupyterLab past corral's
proxy: not a job of another project (the task user, `run_as`), with whatever it finds in
the notebook's folders, nor any other user.

The server runs as root with `run_as` where that user can run the engine's Python (here
it may live in a folder of root's only: then the sessions run as root, and the probe
still runs as the task user, with every file of the session's folders handed to it).
"""

from __future__ import annotations

import os
import pathlib
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator

import psutil
import pytest

from tests import conftest
from tests.api import test_notebooks as nbt

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="starting tasks as another user "
                                 "needs a server running as root")]
USER = "nobody"

#: what a job of another project tries, as the task user: with what it found in the
#: notebook's folders (on stdin, one a line), or nothing, to reach its JupyterLab directly
PROBE = r"""
import socket, sys, urllib.request
nb_id, sock = sys.argv[1:3]
ports = [int(p) for p in sys.argv[3:]]
found = ["", *sys.stdin.read().splitlines()]
try:
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(sock)
        s.sendall(f"GET /notebooks/{nb_id}/api/status HTTP/1.0\r\n\r\n".encode())
        print("socket:", s.recv(100).decode(errors="replace").splitlines()[0])
except OSError as exc:
    print("socket: refused", type(exc).__name__)
for port in ports:
    for token in found:
        req = urllib.request.Request(f"http://127.0.0.1:{port}/notebooks/{nb_id}/api/status",
                                     headers={"Authorization": f"token {token}"})
        try:
            print(f"port {port}:", urllib.request.urlopen(req, timeout=5).status)
        except OSError as exc:
            print(f"port {port}: refused", exc)
"""


def _runs_python(user: pwd.struct_passwd) -> bool:
    try:
        return subprocess.run([sys.executable, "-c", "pass"], user=user.pw_uid,
                              group=user.pw_gid, extra_groups=[], cwd="/",
                              capture_output=True).returncode == 0
    except PermissionError:
        return False


@pytest.fixture(scope="module")
def live() -> Iterator[conftest.Live]:
    folder = pathlib.Path(tempfile.mkdtemp(prefix="corral-nb-"))
    folder.chmod(0o755)  # (pytest's own tmp dirs are root's only)
    run_as = USER if _runs_python(pwd.getpwnam(USER)) else None
    server = conftest.start_live(folder / "home", run_as=run_as, notebook_check_interval=0.2)
    try:
        yield server
    finally:
        conftest.stop_live(server)
        shutil.rmtree(folder, ignore_errors=True)


def _jupyterlab(nb_id: str) -> psutil.Process:
    mark = f"--ServerApp.base_url=/notebooks/{nb_id}/"
    # (its command line: the engine's Python, labstart.py's text, JupyterLab's arguments)
    found = [p for p in psutil.process_iter(["cmdline"]) if mark in (p.info["cmdline"] or ())]
    assert len(found) == 1, found
    return found[0]


def test_a_job_reaches_no_jupyterlab_past_the_proxy(live: conftest.Live) -> None:
    nobody = pwd.getpwnam(USER)
    nb = nbt.wait(live, nbt.create(live, "guarded-lab")["id"], "RUNNING")
    kernel = nbt.new_kernel(live, nb["id"])
    task_uid = nobody.pw_uid if live.settings.run_as else 0
    assert nbt.run_code(live, nb["id"], kernel, "import os; os.getuid()") == str(task_uid)

    lab = _jupyterlab(nb["id"])
    assert lab.uids().real == task_uid
    found = []
    for path in (live.settings.home / "notebooks" / nb["id"]).rglob("*"):
        if path.is_file():
            found.extend(path.read_text(errors="replace").splitlines())
    ports = [c.laddr.port for c in lab.net_connections(kind="inet")
             if c.status == psutil.CONN_LISTEN]
    sock = pathlib.Path(next(a for a in lab.cmdline() if a.startswith("--ServerApp.sock="))
                        .split("=", 1)[1])
    assert sock.parent == live.settings.home / "jupyter"

    probe = subprocess.run(
        [_python_for(nobody), "-c", PROBE, nb["id"], str(sock), *map(str, ports)],
        input="\n".join(found), user=nobody.pw_uid, group=nobody.pw_gid, extra_groups=[],
        cwd="/", env={"PATH": os.environ["PATH"]}, capture_output=True, text=True,
        timeout=60)
    assert probe.returncode == 0, probe.stderr
    assert ": 200" not in probe.stdout, probe.stdout  # JupyterLab answered it
    assert ports == [], probe.stdout  # it listens on no TCP port at all
    assert probe.stdout.splitlines()[0] == "socket: refused PermissionError", probe.stdout
    info = sock.stat()  # the server's, and its alone
    assert stat.S_ISSOCK(info.st_mode) and info.st_uid == 0
    assert stat.S_IMODE(info.st_mode) == 0o600
    assert nbt.show(live, nb["id"])["status"] == "RUNNING"
    nbt.remove(live, nb["id"])
    assert not sock.exists()


def _python_for(user: pwd.struct_passwd) -> str:
    """A Python the user can run: this one, else the system's."""
    if _runs_python(user):
        return sys.executable
    found = shutil.which("python3", path="/usr/bin:/bin")
    assert found, "no Python for the probe"
    return found
