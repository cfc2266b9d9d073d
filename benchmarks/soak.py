"""corral's servers killed (`kill -9`) and frozen (SIGSTOP) at random moments while jobs
run: does every job still run exactly once and complete?

    python benchmarks/soak.py                        # one server on SQLite
    python benchmarks/soak.py --postgres             # one server on PostgreSQL
    python benchmarks/soak.py --servers 3            # three servers on one PostgreSQL
    python benchmarks/soak.py --seed 7 --jobs 30 --faults 20
    python benchmarks/soak.py --quick                # a smoke run: 4 jobs, 3 short faults
    python benchmarks/soak.py --kind pipelines       # pipelines of four runs instead of jobs
    python benchmarks/soak.py --kind searches        # searches of four trials instead
    python benchmarks/soak.py --kind loops           # incremental-learning loops instead
    python benchmarks/soak.py --ray 127.0.0.1:6379    # the jobs on that Ray cluster

Each job appends a line to a file outside corral when it starts and another when it ends;
that file, not corral, says how often each ran. With `--kind pipelines` each of the
`--jobs` is a pipeline (a task, one fanned out over two items after it, a last one after
those), with `--kind searches` a grid search of four trials, two at once, with `--kind
loops` an incremental-learning loop given three batches of samples: each of their runs
(trials, rounds' jobs) must run once, and each pipeline succeed (search complete, round
be promoted). Between the submissions and until every job has ended, a random server is
killed (and started again a moment later) or frozen for 2-14 s (then woken), `--faults`
times in all, at random moments (`--seed` replays a run). With several servers, they
share one database and one `CORRAL_HOME`, as [High
availability](../docs/high-availability.md) says to run them; the client calls whichever
server is up. A check, not a timing: it prints each fault, then a line per job that did
not run once or did not complete, and PASS or FAIL; it exits 1 on FAIL. A server that
exits though nobody killed it is a problem found too (it is started again).

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
#: how long the jobs run, each drawn from these (seconds); shorter in a quick run
DURATIONS = (0.2, 1.0, 3.0, 6.0)
QUICK_DURATIONS = (0.2, 0.5, 1.0, 2.0)
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
        #: problems: servers that exited though nobody killed them
        self.exited: list[str] = []
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
        (half a second to two); start again, as a problem found, one that exited by
        itself."""
        now = time.monotonic()
        for i, p in list(self.procs.items()):
            if p.poll() is not None and i not in self.killed:
                self.exited.append(f"server {i} exited by itself (code {p.returncode}); "
                                   f"its log: server-{i}.log")
                log.append(f"server {i} exited by itself, started again")
                self.start(i)
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

    def create(self, path: str, body: Any) -> Any:
        """POST `body` to `path`; what was made (its JSON), or the run stops saying why."""
        r = self.call("POST", path, body)
        if r.status_code != 201:
            raise SystemExit(f"POST {path} refused: {r.status_code} {r.text}")
        return r.json()


def injected(log: Sequence[str]) -> int:
    """The faults in the log (kills and freezes, not the starts and wakes after them)."""
    return sum(1 for line in log if line.startswith(("kill", "freeze")))


def where(count: pathlib.Path) -> str:
    """A command that writes where it runs into the count file: `where-local` on this
    machine, `where-<Ray node id>` on a Ray node (its job's CORRAL_RAY_NODE_ID)."""
    return f'echo "where-${{CORRAL_RAY_NODE_ID:-local}}" >> {count}'


def job_command(count: pathlib.Path, n: int | str, seconds: float) -> str:
    """A job's command: `start-N` into the count file, a sleep, `end-N`; the job's
    arguments, if it has any (a pipeline item's `--i=0`), end the name (`start-N--i=0`)
    and go to `true`, last."""
    return (f'echo "start-{n}$1" >> {count}; {where(count)}; sleep {seconds}; '
            f'echo "end-{n}$1" >> {count}; true')


class Jobs:
    """The soak's work as training jobs: each runs once and completes."""

    what = "jobs"
    ended_phases: Sequence[str] = bench_local.TERMINAL

    def __init__(self, count: pathlib.Path, rng: random.Random,
                 durations: Sequence[float] = DURATIONS) -> None:
        self.count = count
        self.rng = rng
        self.durations = durations

    def submit(self, client: Client, n: int) -> str:
        body = bench_local.job_body(job_command(self.count, n, self.rng.choice(self.durations)),
                                    f"soak{n}")
        return str(client.create("/training-jobs", body)["metadata"]["id"])

    def prepare(self, client: Client) -> None:
        """What they need before the first is submitted (nothing, for jobs)."""

    def phase(self, client: Client, ident: str) -> str:
        return str(client.call("GET", f"/training-jobs/{ident}").json()["status"]["phase"])

    def feed(self, client: Client, ids: Sequence[str]) -> None:
        """What they are given while they run (nothing, for jobs); called after each look
        at their phases."""

    def tally(self, lines: Sequence[str], ids: Sequence[str], phases: Sequence[str],
              ) -> list[str]:
        return tally(lines, ids, phases)


#: a soak pipeline's runs: a first task, one fanned out to two items, a last one after both
PIPELINE_RUNS = ("-a", "-b--i=0", "-b--i=1", "-c")


class Pipelines(Jobs):
    """The soak's work as pipelines (a, then b over two items, then c): each pipeline
    succeeds, and each of its runs starts once and ends once."""

    what = "pipelines"
    ended_phases = ("success", "failed", "canceled", "timeout")

    def __init__(self, count: pathlib.Path, rng: random.Random,
                 durations: Sequence[float] = DURATIONS) -> None:
        super().__init__(count, rng, durations)
        self.tag = f"{rng.randrange(1 << 30):x}"  # pipeline names are unique in a project

    def body(self, n: int) -> dict[str, Any]:
        def task(name: str, **more: Any) -> dict[str, Any]:
            command = job_command(self.count, f"p{n}-{name}", self.rng.choice(self.durations))
            return {"name": name, "algorithm": {"command": command},
                    "spec": {"resource": {"flavor_id": bench_local.FLAVOR,
                                          "node_count": 1}}, **more}
        return {"kind": "pipeline", "metadata": {"name": f"soak-{self.tag}-{n}"},
                "tasks": [task("a"),
                          task("b", depends_on=["a"], for_each=[{"i": 0}, {"i": 1}]),
                          task("c", depends_on=["b"])]}

    def submit(self, client: Client, n: int) -> str:
        return str(client.create("/pipelines", self.body(n))["id"])

    def phase(self, client: Client, ident: str) -> str:
        return str(client.call("GET", f"/pipelines/{ident}").json()["status"]["state"])

    def tally(self, lines: Sequence[str], ids: Sequence[str], phases: Sequence[str],
              ) -> list[str]:
        return runs_tally(lines, ids, phases, "pipeline", "p", PIPELINE_RUNS, "success")


#: a soak search's trials: one for each value of its one parameter (a grid search)
SEARCH_TRIALS = ("--t=0", "--t=1", "--t=2", "--t=3")


class Searches(Jobs):
    """The soak's work as hyperparameter searches (a grid of four trials, two at once):
    each search completes, and each trial starts once and ends once."""

    what = "searches"

    def submit(self, client: Client, n: int) -> str:
        command = job_command(self.count, f"s{n}", self.rng.choice(self.durations))
        body = bench_local.job_body(f"{command}; echo reward=1", f"soak{n}")
        body["algorithm"]["policies"] = {"auto_search": {
            "reward_attrs": [{"name": "reward", "mode": "max", "regex": "reward=([0-9.]+)"}],
            "search_params": [{"name": "t", "param_type": "discrete",
                               "discrete_values": ["0", "1", "2", "3"]}],
            "algo_configs": [{"name": "grid_search", "params": [
                {"key": "num_samples", "value": "0", "type": "int"},
                {"key": "max_concurrent", "value": "2", "type": "int"}]}]}}
        return str(client.create("/training-jobs", body)["metadata"]["id"])

    def tally(self, lines: Sequence[str], ids: Sequence[str], phases: Sequence[str],
              ) -> list[str]:
        return runs_tally(lines, ids, phases, "search", "s", SEARCH_TRIALS, "Completed")


#: batches of new samples each loop is given, one after its last round started
LOOP_BATCHES = 3
#: samples a batch: half of them train (a round starts at 2), half evaluate
LOOP_BATCH = 4
#: what an evaluation reports: the new model better by far, so that each round promotes
LOOP_METRICS = '{"0/accuracy": 0.9, "1/accuracy": 0.5}'


class Loops(Jobs):
    """The soak's work as incremental-learning loops, each on a dataset of its own given
    LOOP_BATCHES batches of samples, one after the other: each round's train and eval
    jobs run once, each round is Promoted, and every training sample is trained on."""

    what = "loops"
    ended_phases = ("done",)

    def __init__(self, count: pathlib.Path, rng: random.Random,
                 durations: Sequence[float] = DURATIONS) -> None:
        super().__init__(count, rng, durations)
        self.tag = f"{rng.randrange(1 << 30):x}"
        self.model = f"soak-{self.tag}"
        self.folder = count.parent / "loops"
        #: loop -> (its status as last read, its dataset's samples as last read)
        self.seen: dict[str, tuple[dict[str, Any], int]] = {}
        self.batches: dict[str, int] = {}  #: loop -> batches appended
        self.numbers: dict[str, int] = {}  #: loop -> its n

    def prepare(self, client: Client) -> None:
        """The loops' first model: a job's output registered as its version 1."""
        out = self.folder / "initial-model"
        body = bench_local.job_body(f"mkdir -p {out} && echo m > {out}/m.txt",
                                    f"soak-{self.tag}-initial")
        body["metadata"]["annotations"] = {"corral/model-name": self.model}
        body["algorithm"]["outputs"] = [{"name": "train_url",
                                         "remote": {"obs": {"obs_url": str(out)}}}]
        job = client.create("/training-jobs", body)["metadata"]["id"]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if (client.call("GET", f"/training-jobs/{job}").json()["status"]["phase"]
                    in bench_local.TERMINAL
                    and client.call("GET", f"/models/{self.model}").status_code == 200):
                return
            time.sleep(0.2)
        raise SystemExit("the loops' first model was not registered within a minute")

    def submit(self, client: Client, n: int) -> str:
        name = f"soak-{self.tag}-{n}"
        data = self.folder / f"{n}.txt"
        data.parent.mkdir(parents=True, exist_ok=True)
        data.touch()
        client.create("/datasets", {"name": name, "url": str(data)})
        client.create("/incremental-learning-jobs", self.body(n, name))
        self.batches[name], self.numbers[name] = 0, n
        return name

    def body(self, n: int, name: str) -> dict[str, Any]:
        def job(stage: str, then: str) -> dict[str, Any]:
            edge = f"l{n}-r$IL_ROUND-{stage}"
            command = (f'echo "start-{edge}" >> {self.count}; {where(self.count)}; {then}; '
                       f'sleep {self.rng.choice(self.durations)}; '
                       f'echo "end-{edge}" >> {self.count}; true')
            return {"algorithm": {"command": command},
                    "spec": {"resource": {"flavor_id": bench_local.FLAVOR, "node_count": 1}}}
        model_file = 'mkdir -p "$MODEL_URL" && echo m > "$MODEL_URL/m.txt"'
        return {"metadata": {"name": name}, "spec": {
            "dataset": {"name": name, "trainProb": 0.5},
            "initialModel": {"name": self.model},
            "trainSpec": {"template": job("train", model_file), "trigger": {
                "checkPeriodSeconds": 1,
                "condition": {"operator": ">=", "threshold": LOOP_BATCH // 2,
                              "metric": "num_of_samples"}}},
            "evalSpec": {"template": job("eval", f"echo 'corral:metrics {LOOP_METRICS}'")},
            "deploySpec": {"model": {"alias": f"loop{n}"}, "trigger": {"condition": {
                "operator": ">", "threshold": 0.05, "metric": "accuracy_delta"}}},
            "outputDir": str(self.folder / f"out-{n}")}}

    def phase(self, client: Client, ident: str) -> str:
        """`done` once every batch is given, every round has ended, the loop waits, and
        the rounds (not failed) trained on half of the dataset's samples."""
        status = client.call("GET", f"/incremental-learning-jobs/{ident}").json()["status"]
        samples = int(client.call("GET", f"/datasets/{ident}").json()["number_of_samples"])
        self.seen[ident] = (status, samples)
        rounds = status["rounds"]
        trained = sum(r["train_samples"] or 0 for r in rounds if r["state"] != "Failed")
        if (self.batches[ident] >= LOOP_BATCHES and status["state"] == "Waiting"
                and all(r["state"] in LOOP_ROUND_ENDED for r in rounds)
                and trained * 2 == samples):
            return "done"
        return str(status["state"])

    def feed(self, client: Client, ids: Sequence[str]) -> None:
        """A loop's next batch, once every batch given so far started a round."""
        for ident in ids:
            status, _samples = self.seen[ident]
            given = self.batches[ident]
            if given < LOOP_BATCHES and len(status["rounds"]) >= given:
                n = self.numbers[ident]
                batch = [f"l{n}-b{given}-{i}" for i in range(LOOP_BATCH)]
                r = client.call("POST", f"/datasets/{ident}/samples", {"samples": batch})
                if r.status_code == 200:
                    self.batches[ident] = given + 1

    def tally(self, lines: Sequence[str], ids: Sequence[str], phases: Sequence[str],
              ) -> list[str]:
        return loop_tally(lines, [(self.numbers[i], i, self.seen[i][0]) for i in ids],
                          phases)


LOOP_ROUND_ENDED = ("Promoted", "Rejected", "Failed", "Stopped")


def loop_tally(lines: Sequence[str], loops: Sequence[tuple[int, str, dict[str, Any]]],
               phases: Sequence[str]) -> list[str]:
    """What is wrong with each loop (n, name, status): not done; a round not Promoted; a
    round whose train or eval job did not start once and end once (`start-lN-rR-train`
    ...); side effects of a round the loop does not have."""
    problems = []
    for (n, name, status), phase in zip(loops, phases, strict=True):
        wrong = [] if phase == "done" else [f"not done: {phase}"]
        numbers = {r["number"] for r in status["rounds"]}
        for r in status["rounds"]:
            if r["state"] != "Promoted":
                wrong.append(f"round {r['number']} {r['state']}: {r.get('message')}")
            for stage in ("train", "eval"):
                edge = f"l{n}-r{r['number']}-{stage}"
                counts = (lines.count(f"start-{edge}"), lines.count(f"end-{edge}"))
                if counts != (1, 1):
                    wrong.append(f"round {r['number']} {stage} started {counts[0]} "
                                 f"time(s), ended {counts[1]} time(s)")
        strays = sorted({line.split("-")[2] for line in lines
                         if line.startswith((f"start-l{n}-r", f"end-l{n}-r"))
                         and int(line.split("-")[2][1:]) not in numbers})
        wrong += [f"jobs of a round it does not have: {r}" for r in strays]
        if wrong:
            problems.append(f"loop {n} ({name}): " + "; ".join(wrong))
    return problems


def runs_tally(lines: Sequence[str], ids: Sequence[str], phases: Sequence[str],
               what: str, letter: str, runs: Sequence[str], good: str) -> list[str]:
    """What is wrong with each pipeline (or search): not in the phase `good`, or a run
    (trial) that did not start once and end once: `start-<letter>N<run>`, `end-...`."""
    problems = []
    for n, (ident, phase) in enumerate(zip(ids, phases, strict=True)):
        counts = [(r, lines.count(f"start-{letter}{n}{r}"), lines.count(f"end-{letter}{n}{r}"))
                  for r in runs]
        wrong = [f"; {r} started {s} time(s), ended {e} time(s)" for r, s, e in counts
                 if (s, e) != (1, 1)]
        if wrong or phase != good:
            problems.append(f"{what} {n} ({ident}): {phase}{''.join(wrong)}")
    return problems


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
        quick: bool = False, kind: str = "jobs", ray: bool = False,
        ) -> tuple[list[str], list[str]]:
    """Submit the jobs (pipelines, searches, loops) and inject the faults until every one
    has ended; (the faults, the problems found). `ray`: a job that ran on this machine
    rather than on a Ray node is a problem too."""
    count = work / "count"
    count.touch()
    log: list[str] = []
    client = Client(servers, rng, log)
    freeze_s = QUICK_FREEZE_S if quick else FREEZE_S
    kinds = {"jobs": Jobs, "pipelines": Pipelines, "searches": Searches, "loops": Loops}
    work_kind = kinds[kind](count, rng, QUICK_DURATIONS if quick else DURATIONS)
    work_kind.prepare(client)
    ids = []
    for n in range(jobs):
        ids.append(work_kind.submit(client, n))
        if injected(log) < faults and rng.random() < 0.2:
            fault(servers, rng, log, freeze_s)
    deadline = time.monotonic() + GIVE_UP_S
    while time.monotonic() < deadline:
        servers.tend(log)
        phases = [work_kind.phase(client, i) for i in ids]
        if all(p in work_kind.ended_phases for p in phases) and injected(log) >= faults:
            break
        work_kind.feed(client, ids)
        if injected(log) < faults and rng.random() < 0.5:
            fault(servers, rng, log, freeze_s)
        time.sleep(rng.uniform(0.2, 1.5))
    else:
        return log, [f"not every one of the {work_kind.what} ended within {GIVE_UP_S:.0f} s"]
    time.sleep(SETTLE_S)
    lines = count.read_text().split()
    phases = [work_kind.phase(client, i) for i in ids]
    summary, wrong_place = placement(lines, ray)
    log.append(summary)
    return log, servers.exited + wrong_place + work_kind.tally(lines, ids, phases)


def placement(lines: Sequence[str], ray: bool) -> tuple[str, list[str]]:
    """What the count file says of the jobs' starts, ends and places, and (`ray`) a
    problem when some ran on this machine rather than on a Ray node."""
    here = lines.count("where-local")
    ray_nodes = sum(x.startswith("where-") for x in lines) - here
    summary = (f"the file outside corral: {sum(x.startswith('start-') for x in lines)} "
               f"starts, {sum(x.startswith('end-') for x in lines)} ends; {here} on this "
               f"machine, {ray_nodes} on Ray nodes")
    return summary, ([f"{here} job(s) ran on this machine, not on the Ray cluster"]
                     if ray and here else [])


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
    p.add_argument("--ray", metavar="ADDRESS",
                   help="run the jobs on this Ray cluster (HOST:PORT), not as local processes")
    p.add_argument("--postgres-admin", default=ADMIN_URL,
                   help="where the throwaway database is made")
    p.add_argument("--kind", choices=("jobs", "pipelines", "searches", "loops"), default="jobs",
                   help="training jobs, pipelines of 4 runs, searches of 4 trials, "
                   "or incremental-learning loops given 3 batches each")
    p.add_argument("--jobs", type=int, default=None, help="how many of them (16; 4 quick)")
    p.add_argument("--faults", type=int, default=None,
                   help="kills and freezes in all (10; 3 quick)")
    p.add_argument("--seed", type=int, default=None, help="replay a run (printed each run)")
    p.add_argument("--quick", action="store_true",
                   help="4 jobs of 0.2-2 s, 3 faults (unless given), freezes of 1-3 s")
    p.add_argument("--keep", action="store_true", help="keep the servers' logs on FAIL")
    p.add_argument("--home-parent", type=pathlib.Path, default=bench_local.DEFAULT_HOME_PARENT,
                   help="where the temporary home is made (default: your home)")
    a = p.parse_args(argv)
    if a.servers < 1:
        p.error("--servers takes 1 or more")
    a.jobs = a.jobs if a.jobs is not None else 4 if a.quick else 16
    a.faults = a.faults if a.faults is not None else 3 if a.quick else 10
    # Stopped with SIGTERM (or Ctrl-C), it still stops its servers and what they started.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    seed = a.seed if a.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    postgres = a.postgres or a.servers > 1
    db = bench_scale.Db("PostgreSQL", a.postgres_admin) if postgres else bench_scale.Db("SQLite")
    on_ray = f", jobs on the Ray cluster at {a.ray}" if a.ray else ""
    print(f"soak: {a.servers} server(s) on {db.name}{on_ray}, {a.jobs} {a.kind}, "
          f"{a.faults} faults, seed {seed}", flush=True)
    with workdir(a.home_parent) as work:
        home = work / "home"
        with bench_scale.database(db, home) as (_url, env):
            if a.ray:
                env = {**env, "CORRAL_RAY_ADDRESS": a.ray}
            servers = Servers(a.servers, home, env)
            try:
                servers.start_all()
                log, problems = run(servers, work, a.jobs, a.faults, rng,
                                    a.quick, a.kind, bool(a.ray))
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
    print(f"{verdict}: {a.jobs} {a.kind} through {injected(log)} faults; {outcome}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
