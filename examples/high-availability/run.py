"""Two corral servers on one PostgreSQL database; the leader is killed with kill -9.

    python examples/high-availability/run.py [--database URL] [--keep]

What it shows, typing the `corral` commands a user would (each printed first):

1. two `corral server` processes, `a` and `b`, on one fresh database and one CORRAL_HOME;
   `corral info` at either says which one leads;
2. a job submitted to the follower is started by the leader;
3. the leader is killed (SIGKILL, no goodbye); the follower takes the lease over within
   seconds (the time is printed), adopts the running job, and the job completes, having
   started once.

It needs a PostgreSQL server that the `postgres` user reaches without a password
(`--database` names it; the default is the local one); it makes a database of its own,
`corral_ha_example`, and drops it at the end. See docs/high-availability.md.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import TypeVar

import sqlalchemy as sa

T = TypeVar("T")
DATABASE = "corral_ha_example"
HERE = pathlib.Path(__file__).resolve().parent
#: the `corral` command installed beside this Python (a virtualenv's), else on the PATH
CORRAL = str(pathlib.Path(sys.executable).with_name("corral")
             if pathlib.Path(sys.executable).with_name("corral").exists()
             else shutil.which("corral") or "corral")


class Server:
    def __init__(self, name: str, home: pathlib.Path, database: str) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.name = name
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {**os.environ, "CORRAL_HOME": str(home), "CORRAL_DATABASE_URL": database,
                    "CORRAL_PORT": str(self.port), "CORRAL_SERVER_NAME": name,
                    "CORRAL_TICK_INTERVAL": "0.5"}
        self.log = home.parent / f"server-{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen([CORRAL, "server"],
                                         env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        wait(lambda: self.corral("info", "--json", quiet=True) == 0, 60,
             f"server {self.name} to answer (its log: {self.log})")

    def kill(self) -> None:
        if self.proc is not None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            self.proc = None

    def corral(self, *args: str, quiet: bool = False) -> int:
        """`corral ARGS...` against this server; its exit status."""
        if not quiet:
            print(f"\n$ corral --url {self.url} {shlex.join(args)}", flush=True)
        done = subprocess.run([CORRAL, "--url", self.url, *args],
                              env=self.env, capture_output=quiet, text=True)
        return done.returncode

    def output(self, *args: str) -> str:
        return subprocess.run([CORRAL, "--url", self.url, *args],
                              env=self.env, capture_output=True, text=True,
                              check=True).stdout


def wait(test: Callable[[], T | None], timeout: float, what: str) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = test()
        if got:
            return got
        time.sleep(0.2)
    raise SystemExit(f"gave up waiting for {what}")


def leader_of(srv: Server) -> str:
    """The name of the server that leads, as `srv` says ("" while none does)."""
    leader = json.loads(srv.output("info", "--json")).get("leader")
    return str(leader["name"]) if leader else ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--database", default="postgresql+psycopg://postgres@127.0.0.1:5432",
                        help="the PostgreSQL server (without a database name)")
    parser.add_argument("--keep", action="store_true", help="keep the home and the database")
    args = parser.parse_args()
    admin = sa.create_engine(f"{args.database}/postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")
        conn.exec_driver_sql(f"CREATE DATABASE {DATABASE}")
    root = pathlib.Path(tempfile.mkdtemp(prefix="corral-ha-"))
    servers = {n: Server(n, root / "home", f"{args.database}/{DATABASE}") for n in "ab"}
    try:
        for srv in servers.values():  # one after the other: the first makes the tables
            srv.start()
        a = servers["a"]
        a.corral("info")
        lead = servers[wait(lambda: leader_of(a), 30, "a leader")]
        follower = next(s for s in servers.values() if s is not lead)
        print(f"\n{lead.name} leads; the job goes to {follower.name}, the follower")
        follower.corral("submit", str(HERE / "job.yaml"))
        wait(lambda: "started" in follower.output("logs", "survivor"), 60,
             "the leader to start the job")
        follower.corral("logs", "survivor")

        print(f"\nkill -9 {lead.name} (pid {lead.proc.pid if lead.proc else '?'})")
        killed = time.monotonic()
        lead.kill()
        wait(lambda: leader_of(follower) == follower.name, 30, "the follower to lead")
        print(f"{follower.name} leads after {time.monotonic() - killed:.1f} s")
        follower.corral("info")
        follower.corral("logs", "-f", "survivor")
        follower.corral("show", "survivor")
        text = follower.output("logs", "survivor")
        if text.count("started") != 1 or "done" not in text:
            print("the job did not run exactly once to its end", file=sys.stderr)
            return 1
        print("\nthe job started once, was adopted by the new leader and completed")
        return 0
    finally:
        for srv in servers.values():
            srv.kill()
        if args.keep:
            print(f"kept: {root} and database {DATABASE}")
        else:
            shutil.rmtree(root, ignore_errors=True)
            with admin.connect() as conn:
                conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")
        admin.dispose()


if __name__ == "__main__":
    sys.exit(main())
