"""Starts a session's JupyterLab so that nothing but the server ever connects to its socket.

The session job runs this as `python -c <this file's text> <the server's uid> <JupyterLab's
arguments>`, in the notebook's engine (standard library and JupyterLab only: corral need
not be installed there). On a Ray node (`tcp:<token file>` instead of the uid) it only sets
JupyterLab's token from that file: JupyterLab listens on TCP there, and asks for it.

JupyterLab itself binds its unix socket, makes it 0600 and listens at once: from then until
the server takes the socket as its own (`sockets.claim`), any process of the task user,
which every job of every project runs as, could connect and open a kernel or a terminal.
Here its bind is replaced: the socket is made with mode 0 (no user but root may connect),
and listen() is called only once the server owns it, mode 0600. Until then a connection is
refused whoever tries (nothing listens); after it, only the server may connect. A job of
the task user can still remove the socket before the server takes it (it is that user's
until then), which keeps the session from starting, but never reach it.
"""

from __future__ import annotations

import contextlib
import os
import runpy
import socket
import stat
import sys
import time

#: how often the socket's owner is looked at while the server has not taken it
POLL_S = 0.005


def main() -> None:
    server_uid, *args = sys.argv[1:]
    if server_uid.startswith("tcp:"):  # on a Ray node: over TCP, with the token in a file
        with open(server_uid[len("tcp:"):]) as fh:
            os.environ["JUPYTER_TOKEN"] = fh.read().strip()
        sys.argv = ["jupyter-lab", *args]
        runpy.run_module("jupyterlab", run_name="__main__", alter_sys=True)
        return
    from jupyter_server import serverapp

    if not hasattr(serverapp, "bind_unix_socket"):
        sys.exit("corral: this engine's jupyter_server binds its socket in a way corral "
                 "does not know, so it cannot be kept from other jobs: use jupyter_server "
                 ">= 2")

    def bind(file: str, mode: int = 0o600, backlog: int = 128) -> socket.socket:
        with contextlib.suppress(FileNotFoundError):  # as JupyterLab's own bind does:
            if stat.S_ISSOCK(os.stat(file, follow_symlinks=False).st_mode):
                os.remove(file)  # a socket left there (or planted) goes
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.setblocking(False)
        old = os.umask(0o777)  # (a socket's mode is 0777 less the umask)
        # A path longer than a socket's address holds (108 bytes) is reached through a
        # descriptor of its folder, as the server connects to it.
        folder = os.open(os.path.dirname(file) or ".", os.O_PATH | os.O_DIRECTORY)
        try:
            sock.bind(f"/proc/self/fd/{folder}/{os.path.basename(file)}")
        finally:
            os.umask(old)
            os.close(folder)
        _await_server(file, int(server_uid))
        sock.listen(backlog)
        return sock

    serverapp.bind_unix_socket = bind
    sys.argv = ["jupyter-lab", *args]
    runpy.run_module("jupyterlab", run_name="__main__", alter_sys=True)


def _await_server(path: str, server_uid: int) -> None:
    """Wait until the server has taken the socket: its owner, mode 0600 (a job can make
    the mode 0600 while the socket is the task user's, never its owner the server's). Its
    removal meanwhile (by a job) raises FileNotFoundError: the session fails."""
    while True:
        info = os.stat(path, follow_symlinks=False)
        if info.st_uid == server_uid and stat.S_IMODE(info.st_mode) == 0o600:
            return
        time.sleep(POLL_S)


if __name__ == "__main__":
    main()
