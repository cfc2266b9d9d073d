"""How the server knows a session's JupyterLab by its socket, with real processes: the
socket taken as the server's, the process at its other end, and what a job may have put
at its name instead."""

from __future__ import annotations

import os
import pathlib
import pwd
import signal
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator

import pytest

from corral.kinds.notebooks import jupyter, session, sockets
from corral.oskit import procs
from tests import factories

#: listens on the unix socket argv[1], then waits
LISTEN = """
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(1)
print("listening", flush=True)
time.sleep(600)
"""


def _ticks(pid: int) -> float:
    ticks = procs.start_ticks(pid)
    assert ticks is not None, f"process {pid} is gone"
    return ticks


@pytest.fixture
def folder() -> Iterator[pathlib.Path]:
    # (a short path: a socket's address holds 107 bytes)
    path = pathlib.Path(f"/tmp/corral-sock-test-{os.getpid()}")
    sockets.prepare(path)
    yield path
    for entry in path.iterdir():
        entry.unlink()
    path.rmdir()


def test_the_folder_lets_the_task_user_add_but_not_list_or_remove(folder: pathlib.Path) -> None:
    info = folder.stat()
    assert stat.S_IMODE(info.st_mode) == 0o1733
    assert (info.st_uid, info.st_gid) == (os.geteuid(), os.getegid())
    os.chmod(folder, 0o777)
    sockets.prepare(folder)  # put back as it was
    assert stat.S_IMODE(folder.stat().st_mode) == 0o1733


def test_the_session_s_listener_is_known_and_another_process_is_not(
        folder: pathlib.Path) -> None:
    sock = folder / "a-1.sock"
    assert not sockets.claim(sock)  # nothing there yet
    # The task is a shell that started the listener: as a session job runs JupyterLab.
    task = subprocess.Popen(["/bin/sh", "-c", f'{sys.executable} -c "$0" "$1"; :', LISTEN,
                             str(sock)], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    other = subprocess.Popen(["sleep", "600"], start_new_session=True)
    try:
        assert task.stdout is not None and task.stdout.readline() == "listening\n"
        assert sockets.claim(sock)
        info = sock.stat()
        assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (os.geteuid(), 0o600)
        pid = sockets.listener(sock)
        assert pid is not None and pid != task.pid  # the shell's child
        assert sockets.descends(pid, task.pid, _ticks(task.pid))
        assert not sockets.descends(pid, other.pid, _ticks(other.pid))
        assert not sockets.descends(pid, task.pid, _ticks(task.pid) + 1)  # a reused pid
    finally:
        for proc in (task, other):
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_a_link_or_a_file_at_its_name_is_not_taken(folder: pathlib.Path,
                                                   tmp_path: pathlib.Path) -> None:
    target = tmp_path / "target"
    target.write_text("mine")
    target.chmod(0o644)
    (folder / "b-1.sock").symlink_to(target)
    (folder / "c-1.sock").write_text("not a socket")
    assert not sockets.claim(folder / "b-1.sock")
    assert not sockets.claim(folder / "c-1.sock")
    assert stat.S_IMODE(target.stat().st_mode) == 0o644  # nothing done through the link
    assert sockets.listener(folder / "b-1.sock") is None


def test_jupyterlab_listens_only_once_the_server_has_taken_its_socket(
        folder: pathlib.Path, tmp_path: pathlib.Path) -> None:
    """The session's own command line, with a real JupyterLab: its socket refuses every
    connection (nothing listens, its mode is 0) until the server has made it its own; no
    job of the task user can slip in between JupyterLab's listen() and the server's claim."""
    sock = folder / "lab-1.sock"
    argv = session.lab_argv(sys.executable, sock, "/notebooks/n1/", str(tmp_path))
    lab = subprocess.Popen(argv, cwd=tmp_path, start_new_session=True,
                           env={**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path)},
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        factories.wait_for(sock.exists, 120, "JupyterLab to bind its socket")
        assert stat.S_IMODE(sock.stat().st_mode) == 0
        with socket.socket(socket.AF_UNIX) as probe, pytest.raises(ConnectionRefusedError):
            probe.connect(str(sock))  # what a job would try first

        assert sockets.claim(sock)

        pid = sockets.listener(sock, wait=30)
        assert pid is not None and sockets.descends(pid, lab.pid, _ticks(lab.pid))
        assert jupyter.answers(jupyter.Where(sock=str(sock), base_url="/notebooks/n1/"))
    finally:
        os.killpg(lab.pid, signal.SIGKILL)
        lab.wait()


#: what a job of the task user tries on a session's socket before the server has taken it:
#: give it the mode JupyterLab waits for, then connect
SLIP_IN = """
import os, socket, sys
os.chmod(sys.argv[1], 0o600)
with socket.socket(socket.AF_UNIX) as s:
    try:
        s.connect(sys.argv[1])
        print("connected")
    except OSError as exc:
        print(type(exc).__name__)
"""


def test_a_job_of_the_task_user_cannot_make_jupyterlab_listen_before_the_server_takes_it(
        folder: pathlib.Path, tmp_path: pathlib.Path) -> None:
    """With run_as, JupyterLab and every job run as the task user, the server as another:
    a job that makes the socket's mode 0600 itself, before the server has taken it, does
    not make JupyterLab listen; only the server's owning it does. (The roles' users are
    swapped here: the task user is this test's, the server's another, so that JupyterLab
    runs from this Python, which other users may not be able to run.)"""
    server = pwd.getpwnam("nobody")
    sock = folder / "lab-2.sock"
    argv = session.lab_argv(sys.executable, sock, "/notebooks/n2/", str(tmp_path),
                            server_uid=server.pw_uid)
    lab = subprocess.Popen(argv, cwd=tmp_path, start_new_session=True,
                           env={**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path)},
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        factories.wait_for(sock.exists, 120, "JupyterLab to bind its socket")
        job = subprocess.run([sys.executable, "-c", SLIP_IN, str(sock)], capture_output=True,
                             text=True, timeout=60)
        assert job.stdout.strip() == "ConnectionRefusedError", job.stderr

        os.chown(sock, server.pw_uid, server.pw_gid)  # the server's claim, as that user

        pid = sockets.listener(sock, wait=30)
        assert pid is not None and sockets.descends(pid, lab.pid, _ticks(lab.pid))
    finally:
        os.killpg(lab.pid, signal.SIGKILL)
        lab.wait()
