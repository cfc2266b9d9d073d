"""TensorBoard over a job's summary folder, answering on a socket the server handed it.

The server runs this as `python -I -c <this file's text> <fd> <logdir> <path prefix>
<server pid>`, as the user the job's tasks run as (standard library and TensorBoard only:
corral need not be importable by that user). It binds nothing: descriptor `fd` is a unix
socket that the server bound, in a folder only the server may enter, and listens on;
TensorBoard accepts its connections. So no port is chosen here, no process of the task
user can listen at the address first, and none can connect to it.

Before anything else it makes itself non-dumpable: another process of its user may then
neither trace it nor take its descriptors. TensorBoard's data server is not used
(`--load_fast=false`): it would listen on a TCP port of loopback, which any process of
the machine may reach. It ends when the server that started it does (its parent changes).
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys
import time
from typing import Any

#: prctl(2)'s option that sets whether the process may be traced by its own user
PR_SET_DUMPABLE = 4
#: seconds between looks at the parent
PARENT_S = 1.0


def main() -> None:
    fd, logdir, prefix, parent = (int(sys.argv[1]), sys.argv[2], sys.argv[3],
                                  int(sys.argv[4]))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        sys.exit(f"corral: prctl(PR_SET_DUMPABLE): {os.strerror(ctypes.get_errno())}")
    if os.getppid() != parent:
        sys.exit("corral: the server that started TensorBoard is gone")
    from tensorboard import program
    from werkzeug import serving

    class OnSocket(serving.ThreadedWSGIServer, program.TensorBoardServer):
        daemon_threads = True

        def __init__(self, wsgi_app: Any, flags: Any) -> None:
            super().__init__("unix://corral", 0, wsgi_app, fd=fd)

        def get_url(self) -> str:
            return f"corral's proxy, under {prefix}/"

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # not a line per request
    board = program.TensorBoard(server_class=OnSocket)
    board.configure(argv=[None, "--logdir", logdir, "--path_prefix", prefix,
                          "--load_fast", "false", "--reload_interval", "5"])
    print(f"corral: TensorBoard over {logdir} at {board.launch()}", file=sys.stderr,
          flush=True)
    os.close(fd)  # (the server's socket holds a copy of its own)
    while os.getppid() == parent:
        time.sleep(PARENT_S)


if __name__ == "__main__":
    main()
