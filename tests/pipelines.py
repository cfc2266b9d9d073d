"""Pipelines in tests: bodies built from small task factories, and a platform whose
scheduler runs real processes while the test drives the pipelines' controller itself
(with a clock it may move ahead)."""

from __future__ import annotations

import dataclasses
import json
import pathlib
import threading
import time
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

from corral import server
from corral.domain import identity
from corral.domain.pipelines import status
from corral.kinds.pipelines import actions, controller
from corral.store import job_repo, kind_repo, kind_rows, pipeline_repo, rows
from tests import conftest, factories

#: what every task of these tests runs: it reads its arguments (`--name=value`) and
#: - appends "<tag> <pid>" to the file `note` when given, then waits for file `gate`,
#:   sleeps `sleep` seconds;
#: - writes into each output channel (an argument named out...) a `value.txt` holding the
#:   `value.txt` of each input channel (named in...), then its own `tag` and a ';';
#: - reports `metrics` ("acc:0.9,loss:0.1") as corral:metrics lines;
#: - exits with 3 unless file `fail_unless` exists, else with `exit` (0).
STEP = """
import os, pathlib, sys, time
args = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
if "note" in args:
    with open(args["note"], "a") as fh:
        fh.write(f"{args.get('tag', '?')} {os.getpid()}\\n")
if "gate" in args:
    while not os.path.exists(args["gate"]):
        time.sleep(0.02)
time.sleep(float(args.get("sleep", 0)))
got = "".join(pathlib.Path(v, "value.txt").read_text()
              for k, v in sorted(args.items()) if k.startswith("in"))
for k, v in args.items():
    if k.startswith("out"):
        pathlib.Path(v).mkdir(parents=True, exist_ok=True)
        pathlib.Path(v, "value.txt").write_text(got + args.get("tag", "") + ";")
for m in filter(None, args.get("metrics", "").split(",")):
    name, value = m.split(":")
    print(f"corral:metrics {name}={value}", flush=True)
if "fail_unless" in args and not os.path.exists(args["fail_unless"]):
    sys.exit(3)
sys.exit(int(args.get("exit", 0)))
"""


def step_code(root: pathlib.Path) -> pathlib.Path:
    return factories.write_code(root, STEP, name="step.py")


def task(name: str, code: pathlib.Path, *, deps: tuple[str, ...] = (),
         inputs: dict[str, str] | None = None, outputs: tuple[str, ...] = (),
         **extra: Any) -> dict[str, Any]:
    """A task running STEP: its parameters are the keyword arguments that are not task
    fields (a dict value is a reference: {"metric": "a.acc"} or {"param": "p"})."""
    fields = {"trigger", "when", "finally", "for_each", "parallelism", "cache", "retries"}
    params = [{"name": "tag", "value": name}]
    for key, value in extra.items():
        if key not in fields:
            params.append({"name": key, **(value if isinstance(value, dict)
                                           else {"value": value})})
    body: dict[str, Any] = {
        "name": name, "depends_on": list(deps),
        "algorithm": {
            "code_dir": str(code), "boot_file": "step.py", "parameters": params,
            "inputs": [{"name": k, "from": v} for k, v in (inputs or {}).items()],
            "outputs": [{"name": o} for o in outputs]},
        "spec": {"resource": {"flavor_id": "corral.cpu.1u"}},
    }
    body.update({k: v for k, v in extra.items() if k in fields})
    return body


def pipeline(name: str, *tasks: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"kind": "pipeline", "metadata": {"name": name}, "tasks": list(tasks), **extra}


#: who the harness's pipelines belong to
OWNER = "tester"


@dataclasses.dataclass
class Harness:
    """A platform running jobs for real, with the pipelines' controller driven by the test
    (`step`, `run`) on a clock `skew_ms` ahead of the real one."""

    platform: server.Platform
    controller: controller.Controller
    project_id: str
    skew_ms: int = 0

    @property
    def store(self) -> Any:
        return self.platform.store

    def now(self) -> int:
        return int(time.time() * 1000) + self.skew_ms

    @property
    def owner(self) -> identity.Principal:
        """The user the pipelines are created as, a member of the project (who may change
        them)."""
        return identity.Principal(user_id=OWNER, user_name=OWNER, is_admin=False,
                                  roles={self.project_id: identity.Role.MEMBER})

    def create(self, body: dict[str, Any]) -> str:
        with self.store.begin() as conn:
            p = actions.create(conn, self.controller.platform.services,
                               project_id=self.project_id, user_name=OWNER, data=body,
                               now=self.now())
        return p.id

    def step(self) -> None:
        self.controller.reconcile(self.now())

    def run(self, pipeline_id: str, until: Callable[[], Any] | None = None,
            timeout: float = 60) -> kind_rows.PipelineAttempt:
        """Drive the controller until the pipeline's current attempt has ended (or `until`
        says so); the attempt."""
        if until is not None:
            self.drive(until, timeout)
            return self.attempt(pipeline_id)

        def ended() -> Any:
            a = self.attempt(pipeline_id)
            return a if a.state != status.Status.RUNNING else None

        return self.drive(ended, timeout)  # type: ignore[no-any-return]

    def drive(self, until: Callable[[], Any], timeout: float = 60) -> Any:
        """Drive the controller until `until` answers something true; that."""
        def done() -> Any:
            self.step()
            return until()

        return factories.wait_for(done, timeout, f"{until}")

    def attempt(self, pipeline_id: str) -> kind_rows.PipelineAttempt:
        with self.store.read() as conn:
            p = pipeline_repo.by_id(conn, pipeline_id)
            assert p is not None
            return pipeline_repo.attempt(conn, p.id, p.attempt)

    def runs(self, pipeline_id: str,
             attempt: int | None = None) -> dict[str, kind_rows.PipelineRun]:
        with self.store.read() as conn:
            p = pipeline_repo.by_id(conn, pipeline_id)
            assert p is not None
            return {r.key: r for r in pipeline_repo.runs_of(conn, p.id, attempt or p.attempt)}

    def states(self, pipeline_id: str, attempt: int | None = None) -> dict[str, str]:
        return {k: r.state for k, r in self.runs(pipeline_id, attempt).items()}

    def job(self, job_id: str) -> rows.Job:
        with self.store.read() as conn:
            job = job_repo.job_by_id(conn, job_id)
        assert job is not None
        return job

    def events(self, pipeline_id: str) -> list[str]:
        with self.store.read() as conn:
            return [e.message for e in kind_repo.list_events(conn, "pipeline", pipeline_id,
                                                             limit=1000)[1]]

    def owned(self, pipeline_id: str) -> dict[str, rows.Job]:
        with self.store.read() as conn:
            return job_repo.owned_jobs(conn, "pipeline", pipeline_id)

    def outputs(self, run: kind_rows.PipelineRun) -> dict[str, str]:
        return dict(json.loads(run.outputs or "{}"))

    def value(self, run: kind_rows.PipelineRun, channel: str) -> str:
        return (pathlib.Path(self.outputs(run)[channel]) / "value.txt").read_text()

    def execute(self, statement: Any) -> Any:
        with self.store.begin() as conn:
            return conn.execute(statement)

    def stop(self) -> None:
        conftest.kill_leftovers(self.store)
        self.platform.stop()


def start(home: pathlib.Path, db_url: str, **overrides: Any) -> Harness:
    """A platform on `db_url` whose kinds loop does nothing: the test drives it."""
    settings = conftest.make_settings(home, database_url=db_url, cpus=4,
                                      storage_interval=0.1, **overrides)
    platform = server.build(settings)
    # (It waits for the term's end as the real one does: a term thread that ended early is
    # taken for one stopped by a refused write, and the term begins again.)
    def idle(stop: threading.Event) -> None:
        stop.wait()

    platform.kinds.run_forever = idle  # type: ignore[method-assign]
    platform.start()
    [ctrl] = [c for c in platform.kinds.controllers if isinstance(c, controller.Controller)]
    return Harness(platform=platform, controller=ctrl,
                   project_id=platform.context.default_project_id)


def count(h: Harness, table: sa.Table) -> int:
    with h.store.read() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one())
