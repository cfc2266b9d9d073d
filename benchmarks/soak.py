"""corral's servers killed (`kill -9`) and frozen (SIGSTOP) at random moments while jobs
run: does every job still run exactly once and complete?

    python benchmarks/soak.py                        # one server on SQLite
    python benchmarks/soak.py --postgres             # one server on PostgreSQL
    python benchmarks/soak.py --servers 3            # three servers on one PostgreSQL
    python benchmarks/soak.py --seed 7 --jobs 30 --faults 20
    python benchmarks/soak.py --quick                # a smoke run: 4 jobs, 3 short faults

Each job appends a line to a file outside corral when it starts and another when it ends;
that file, not corral, says how often each ran. Between the submissions and until every
job has ended, a random server is killed (and started again a moment later) or frozen for
2-14 s (then woken), `--faults` times in all, at random moments (`--seed` replays a run).
With several servers, they share one database and one `CORRAL_HOME`, as
[High availability](../docs/high-availability.md) says to run them; the client calls
whichever server is up. A check, not a timing: it prints each fault, then a line per job
that did not run once or did not complete, and PASS or FAIL; it exits 1 on FAIL.

`--postgres` (and `--servers` above 1) makes a throwaway database through
`--postgres-admin` (default postgresql+psycopg://postgres@127.0.0.1:5432/test) and drops
it after.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pathlib
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from typing import Any

import bench_local
import bench_scale
import psutil

from corral.sdk import credentials

ADMIN_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
#: how long a frozen server stays frozen: around the leader's lease (10 s by default);
#: shorter in a quick run
FREEZE_S = (2.0, 14.0)
QUICK_FREEZE_S = (1.0, 3.0)
#: how long the jobs run, each drawn from these (seconds)
DURATIONS = (0.2, 1.0, 3.0, 6.0)
GIVE_UP_S = 300.0
#: how long the file is given, once every job has ended, to show a run that came too late
#: (a job started again after it had completed)
SETTLE_S = 3.0


class Servers:
    """`n` corral servers sharing one home and one database, started and stopped here."""

    def __init__(self, n: int, home: pathlib.Path, env: dict[str, str]) -> None:
        self.home = home
        self.env = env
        drawn: list[int] = []
        while len(drawn) < n:  # the kernel may hand out the same free port twice in a row
            if (port := bench_local.free_port()) not in drawn:
                drawn.append(port)
        self.ports = dict(enumerate(drawn))
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.frozen: dict[int, float] = {}  #: server -> when it is woken
        self.killed: dict[int, float] = {}  #: server -> when it is started again
        self.token = ""
        self.project_id = ""

    def start(self, i: int) -> None:
        env = {**os.environ, **self.env, "CORRAL_HOME": str(self.home),
               "CORRAL_PORT": str(self.ports[i]), "CORRAL_HOST": "127.0.0.1",
               "CORRAL_SERVER_NAME": f"soak-{i}"}
        with open(self.home.parent / f"server-{i}.log", "ab") as out:
            self.procs[i] = subprocess.Popen(
                [sys.executable, "-c", "from corral import server, settings; "
                 "server.serve(settings.load())"],
                env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True)

    def start_all(self) -> None:
        self.start(0)  # the first writes the credentials the others (and the client) use
        self._wait_healthy(0)
        login = credentials.read(self.home / "credentials.json")
        assert login is not None and login.token, "the first server wrote no credential"
        self.token, self.project_id = login.token, login.project_id
        for i in list(self.ports)[1:]:
            self.start(i)
            self._wait_healthy(i)

    def _wait_healthy(self, i: int) -> None:
        bench_local._wait_healthy(self.procs[i], bench_local.Http(
            f"http://127.0.0.1:{self.ports[i]}"), self.home.parent / f"server-{i}.log")

    def up(self) -> list[int]:
        """The servers running and not frozen."""
        return [i for i, p in self.procs.items() if p.poll() is None and i not in self.frozen]

    def kill(self, i: int, down_s: float) -> None:
        os.killpg(self.procs[i].pid, signal.SIGKILL)
        self.procs[i].wait()
        self.killed[i] = time.monotonic() + down_s

    def freeze(self, i: int, seconds: float) -> None:
        os.killpg(self.procs[i].pid, signal.SIGSTOP)
        self.frozen[i] = time.monotonic() + seconds

    def wake_due(self, now: float) -> list[int]:
        woken = [i for i, until in self.frozen.items() if now >= until]
        for i in woken:
            os.killpg(self.procs[i].pid, signal.SIGCONT)
            del self.frozen[i]
        return woken

    def tend(self, log: list[str]) -> None:
        """Wake the servers whose freeze is over; start again those killed a moment ago
        (half a second to two)."""
        now = time.monotonic()
        for i in self.wake_due(now):
            log.append(f"wake server {i}")
        for i, at in list(self.killed.items()):
            if now >= at:
                self.start(i)
                del self.killed[i]
                log.append(f"start server {i}")

    def stop_all(self) -> None:
        """Wake every frozen server, stop them all, then what their launcher left."""
        self.wake_due(float("inf"))
        for p in self.procs.values():
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in self.procs.values():
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        left: list[psutil.Process] = []
        for proc in psutil.process_iter():  # the launchers, keepers and tasks still there
            with contextlib.suppress(psutil.Error):
                if proc.environ().get("CORRAL_HOME") == str(self.home):
                    left += [proc, *proc.children(recursive=True)]
        for proc in left:
            with contextlib.suppress(psutil.Error):
                proc.kill()


class Client:
    """Calls whichever server is up, trying another while none answers."""

    def __init__(self, servers: Servers, rng: random.Random, log: list[str]) -> None:
        self.servers = servers
        self.rng = rng
        self.log = log
        self.conns: dict[int, bench_local.Http] = {}

    def call(self, method: str, path: str, body: Any = None) -> bench_local.Reply:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            up = self.servers.up()
            for i in self.rng.sample(up, len(up)):
                http = self.conns.setdefault(i, bench_local.Http(
                    f"http://127.0.0.1:{self.servers.ports[i]}", self.servers.token))
                try:
                    r = http.request(method, f"/v2/{self.servers.project_id}{path}", body)
                except OSError:
                    http.close()
                    continue
                if r.status_code < 500:
                    return r
            time.sleep(0.2)
            self.servers.tend(self.log)
        raise SystemExit(f"no server answered {method} {path} within a minute")


def injected(log: Sequence[str]) -> int:
    """The faults in the log (kills and freezes, not the starts and wakes after them)."""
    return sum(1 for line in log if line.startswith(("kill", "freeze")))


def job_command(count: pathlib.Path, n: int, seconds: float) -> str:
    return f"echo start-{n} >> {count}; sleep {seconds}; echo end-{n} >> {count}"


def fault(servers: Servers, rng: random.Random, log: list[str],
          freeze_s: tuple[float, float]) -> None:
    """Kill or freeze one server that is up (of several, never the last one up)."""
    up = servers.up()
    if not up or (len(servers.ports) > 1 and len(up) < 2):
        return
    i = rng.choice(up)
    if rng.random() < 0.5:
        servers.kill(i, rng.uniform(0.5, 2.0))
        log.append(f"kill -9 server {i}")
    else:
        seconds = rng.uniform(*freeze_s)
        servers.freeze(i, seconds)
        log.append(f"freeze server {i} for {seconds:.1f} s")


def run(servers: Servers, work: pathlib.Path, jobs: int, faults: int, rng: random.Random,
        freeze_s: tuple[float, float] = FREEZE_S) -> tuple[list[str], list[str]]:
    """Submit the jobs and inject the faults until every job has ended; (the faults, the
    problems found)."""
    count = work / "count"
    count.touch()
    log: list[str] = []
    client = Client(servers, rng, log)
    ids = []
    for n in range(jobs):
        body = bench_local.job_body(job_command(count, n, rng.choice(DURATIONS)), f"soak{n}")
        r = client.call("POST", "/training-jobs", body)
        if r.status_code != 201:
            raise SystemExit(f"submit refused: {r.status_code} {r.text}")
        ids.append(r.json()["metadata"]["id"])
        if injected(log) < faults and rng.random() < 0.2:
            fault(servers, rng, log, freeze_s)
    deadline = time.monotonic() + GIVE_UP_S
    while time.monotonic() < deadline:
        servers.tend(log)
        phases = [client.call("GET", f"/training-jobs/{j}").json()["status"]["phase"]
                  for j in ids]
        if all(p in bench_local.TERMINAL for p in phases) and injected(log) >= faults:
            break
        if injected(log) < faults and rng.random() < 0.5:
            fault(servers, rng, log, freeze_s)
        time.sleep(rng.uniform(0.2, 1.5))
    else:
        return log, [f"not every job ended within {GIVE_UP_S:.0f} s"]
    time.sleep(SETTLE_S)
    lines = count.read_text().split()
    phases = [client.call("GET", f"/training-jobs/{j}").json()["status"]["phase"] for j in ids]
    return log, tally(lines, ids, phases)


def tally(lines: Sequence[str], ids: Sequence[str], phases: Sequence[str]) -> list[str]:
    """What is wrong with each job: `lines` are the side effects' file, one `start-N` and
    one `end-N` for each job that ran once."""
    problems = []
    for n, (job_id, phase) in enumerate(zip(ids, phases, strict=True)):
        starts, ends = lines.count(f"start-{n}"), lines.count(f"end-{n}")
        if (starts, ends, phase) != (1, 1, "Completed"):
            problems.append(f"job {n} ({job_id}): started {starts} time(s), ended {ends} "
                            f"time(s), {phase}")
    return problems


@contextlib.contextmanager
def workdir(parent: pathlib.Path) -> Iterator[pathlib.Path]:
    parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".corral-soak-", dir=parent) as tmp:
        yield pathlib.Path(tmp)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--servers", type=int, default=1, help="servers (more than 1: PostgreSQL)")
    p.add_argument("--postgres", action="store_true", help="PostgreSQL instead of SQLite")
    p.add_argument("--postgres-admin", default=ADMIN_URL,
                   help="where the throwaway database is made")
    p.add_argument("--jobs", type=int, default=16)
    p.add_argument("--faults", type=int, default=10, help="kills and freezes in all")
    p.add_argument("--seed", type=int, default=None, help="replay a run (printed each run)")
    p.add_argument("--quick", action="store_true", help="4 jobs, 3 faults, freezes of 1-3 s")
    p.add_argument("--keep", action="store_true", help="keep the servers' logs on FAIL")
    p.add_argument("--home-parent", type=pathlib.Path, default=bench_local.DEFAULT_HOME_PARENT,
                   help="where the temporary home is made (default: your home)")
    a = p.parse_args(argv)
    if a.servers < 1:
        p.error("--servers takes 1 or more")
    if a.quick:
        a.jobs, a.faults = 4, 3
    # Stopped with SIGTERM (or Ctrl-C), it still stops its servers and what they started.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    seed = a.seed if a.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    postgres = a.postgres or a.servers > 1
    db = bench_scale.Db("PostgreSQL", a.postgres_admin) if postgres else bench_scale.Db("SQLite")
    print(f"soak: {a.servers} server(s) on {db.name}, {a.jobs} jobs, {a.faults} faults, "
          f"seed {seed}", flush=True)
    with workdir(a.home_parent) as work:
        home = work / "home"
        with bench_scale.database(db, home) as (_url, env):
            servers = Servers(a.servers, home, env)
            try:
                servers.start_all()
                log, problems = run(servers, work, a.jobs, a.faults, rng,
                                    QUICK_FREEZE_S if a.quick else FREEZE_S)
            finally:
                servers.stop_all()
        for line in log:
            print(f"  {line}")
        for line in problems:
            print(f"  {line}")
        if problems and a.keep:
            kept = pathlib.Path(f"soak-{seed}")
            shutil.copytree(work, kept, ignore=shutil.ignore_patterns("runs", "*.db*"))
            print(f"  the servers' logs: {kept}")
    verdict = "FAIL" if problems else "PASS"
    outcome = f"{len(problems)} problem(s)" if problems else "each ran once and completed"
    print(f"{verdict}: {a.jobs} jobs through {injected(log)} faults; {outcome}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
