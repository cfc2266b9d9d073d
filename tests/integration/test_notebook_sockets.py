"""How the server knows a session's JupyterLab by its socket, with real processes: the
socket taken as the server's, the process at its other end, and what a job may have put
at its name instead."""

from __future__ import annotations

import os
import pathlib
import signal
import stat
import subprocess
import sys
from collections.abc import Iterator

import pytest

from corral.kinds.notebooks import sockets

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
    raw = pathlib.Path(f"/proc/{pid}/stat").read_bytes()
    return float(raw[raw.rfind(b")") + 2:].split()[19])


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
