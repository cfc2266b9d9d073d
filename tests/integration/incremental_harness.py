"""A loop's controller on a real store, with the clock in the test's hands and its jobs
ended by the test (no processes): what the controller decides, and when."""

from __future__ import annotations

import dataclasses
import datetime
import json
import pathlib
from typing import Any

from corral import settings as settings_mod
from corral.domain import errors, jobs, resources
from corral.domain.incremental import loopspec
from corral.kinds.incremental import actions, controller
from corral.services import catalog as catalog_mod
from corral.services import datasets, finishing, runtime, submit
from corral.storage import objects, paths
from corral.store import (
    dataset_repo,
    db,
    identity_repo,
    job_repo,
    kind_rows,
    loop_repo,
    model_repo,
    rows,
    schema,
)
from tests import conftest

#: noon, local time, on a day of the test's choosing: timers are in the server's local time
NOON = int(datetime.datetime(2026, 3, 2, 12, 0).timestamp() * 1000)


@dataclasses.dataclass
class Harness:
    store: db.Store
    settings: settings_mod.Settings
    project_id: str
    root: pathlib.Path
    controller: controller.Controller
    policy: paths.Policy
    stores: objects.Stores
    now: int = NOON

    # --- the world ----------------------------------------------------------------------

    def tick(self, seconds: float = 0.0) -> bool:
        """Move the clock on and run one pass."""
        self.now += int(seconds * 1000)
        return self.controller.reconcile(self.now)

    def settle(self, seconds: float = 0.0) -> None:
        """Passes until nothing more moves at once."""
        self.now += int(seconds * 1000)
        for _ in range(20):
            if not self.controller.reconcile(self.now):
                return
        raise AssertionError("the controller kept moving")

    def confine(self, path: str, what: str) -> pathlib.Path:
        return paths.confine(self.policy, path, what)

    def dataset(self, name: str = "stream", lines: list[str] | None = None,
                url: str | None = None) -> str:
        if url is None:
            path = self.root / f"{name}.txt"
            path.write_text("".join(f"{x}\n" for x in lines or []))
            url = str(path)
        with self.store.begin() as conn:
            return datasets.create(conn, project_id=self.project_id, user_name="ann", name=name,
                                   url=url, fmt=None, description="", stores=self.stores,
                                   confine=self.confine, now=self.now)

    def append(self, name: str, lines: list[str]) -> int:
        with self.store.read() as conn:
            ds = dataset_repo.get(conn, self.project_id, name)
        return datasets.append(self.store, ds.id, lines, self.stores, self.confine, self.now)

    def model(self, name: str, files: dict[str, str] | None = None) -> int:
        """A model version made by a completed job that wrote `files`."""
        out = self.root / "models-src" / f"{name}-{self.now}"
        job = self.job(command="true", outputs={"train_url": str(out)}, name=f"mk-{self.now}")
        out.mkdir(parents=True)
        for rel, text in (files or {"model.json": "{}"}).items():
            (out / rel).write_text(text)
        self.end(job, "Completed")
        row = finishing.register(self.store, self.stores, self.settings, self.job_row(job), name,
                                 "train_url", lambda: self.now)
        self.now += 1
        return row.version

    def job(self, **kw: Any) -> str:
        from tests import factories

        body = loopspec.job_body(factories.make_job(**kw), kw["name"])
        with self.store.begin() as conn:
            return submit.create_job(conn, self.catalog(), body, project_id=self.project_id,
                                     now=self.now, user_name="ann")

    def catalog(self) -> catalog_mod.Catalog:
        node = resources.Node(name="local", cpu=4, memory_mb=8192)
        return catalog_mod.Catalog.build(self.settings, [node])

    def job_row(self, job_id: str) -> rows.Job:
        with self.store.read() as conn:
            job = job_repo.job_by_id(conn, job_id)
        assert job is not None
        return job

    def end(self, job_id: str, phase: str = "Completed", *, metrics: dict[str, float] | None
            = None, finalized: bool = True) -> None:
        """The job ended in `phase` with these final metrics (as the scheduler and the
        storage thread would have it)."""
        with self.store.begin() as conn:
            conn.execute(schema.jobs.update().where(schema.jobs.c.id == job_id).values(
                phase=phase, secondary_phase=phase, end_time=self.now,
                finalized_at=self.now if finalized else None,
                failure_message=None if phase == "Completed" else "worker-0: exit with 1"))
            for name, value in (metrics or {}).items():
                conn.execute(schema.training_metrics.insert().values(
                    job_id=job_id, attempt=1, task="worker-0", step=None, name=name,
                    value=value, time=self.now))

    def train_done(self, loop: str, files: dict[str, str] | None = None) -> int:
        """The loop's current train job wrote a model and completed; its version."""
        rnd = self.current_round(loop)
        assert rnd.train_job_id
        job = self.job_row(rnd.train_job_id)
        out = pathlib.Path(next(o.local_dir for o in job_repo.job_spec(job).algorithm.outputs
                                if o.name == "train_url"))
        out.mkdir(parents=True, exist_ok=True)
        for rel, text in (files or {"model.json": json.dumps({"round": rnd.number})}).items():
            (out / rel).write_text(text)
        self.end(job.id, "Completed")
        spec = json.loads(self.loop(loop).spec)
        name = spec["deploySpec"].get("model", {}).get("name") or spec["initialModel"]["name"]
        return finishing.register(self.store, self.stores, self.settings, self.job_row(job.id),
                                  name, "train_url", lambda: self.now).version

    def eval_done(self, loop: str, metrics: dict[str, float]) -> None:
        rnd = self.current_round(loop)
        assert rnd.eval_job_id
        self.end(rnd.eval_job_id, "Completed", metrics=metrics)

    # --- loops --------------------------------------------------------------------------

    def create(self, spec: dict[str, Any], name: str = "loop") -> str:
        body = loopspec.parse({"metadata": {"name": name}, "spec": spec})
        with self.store.begin() as conn:
            return actions.create(conn, body, project_id=self.project_id, user_name="ann",
                                  confine=self.confine, now=self.now)

    def loop(self, ref: str) -> kind_rows.Loop:
        with self.store.read() as conn:
            return loop_repo.get_loop(conn, self.project_id, ref)

    def rounds(self, ref: str) -> list[kind_rows.Round]:
        with self.store.read() as conn:
            return loop_repo.rounds_of(conn, self.loop(ref).id)

    def current_round(self, ref: str) -> kind_rows.Round:
        return self.rounds(ref)[-1]

    def deploys(self, ref: str) -> list[kind_rows.Deploy]:
        with self.store.read() as conn:
            return loop_repo.deploys_of(conn, self.loop(ref).id)

    def jobs_of(self, ref: str) -> dict[str, rows.Job]:
        with self.store.read() as conn:
            return job_repo.owned_jobs(conn, "incremental_learning", self.loop(ref).id)

    def alias(self, model: str, alias: str = "production") -> int | None:
        with self.store.read() as conn:
            m = model_repo.get(conn, self.project_id, model)
            return model_repo.aliases(conn, m.id).get(alias)

    def history(self, model: str) -> list[rows.AliasMove]:
        with self.store.read() as conn:
            return model_repo.alias_history(conn, model_repo.get(conn, self.project_id,
                                                                  model).id)

    def act(self, ref: str, what: str, **kw: Any) -> Any:
        with self.store.begin() as conn:
            loop = loop_repo.get_loop(conn, self.project_id, ref)
            fn = getattr(actions, what)
            if what in ("trigger", "stop", "resume"):
                return fn(conn, loop, "bob", self.now)
            return fn(conn, loop, "bob", now=self.now, **kw)

    def events(self, ref: str) -> list[str]:
        from corral.store import kind_repo

        with self.store.read() as conn:
            _total, found = kind_repo.list_events(conn, "incremental_learning",
                                                  self.loop(ref).id, limit=1000)
        return [e.message for e in found]


def make(store: db.Store, tmp_path: pathlib.Path, **settings_: Any) -> Harness:
    settings = conftest.make_settings(tmp_path / "home", **settings_)
    with store.begin() as conn:
        project_id = identity_repo.ensure_default_project(conn, NOON)
    policy = paths.policy_for(settings, project_id=project_id, project_name="default",
                              is_default=True)
    stores = objects.Stores(settings)
    root = tmp_path / "work"
    root.mkdir()
    services = runtime.Runtime(
        store=store, settings=settings, default_project_id=project_id, stores=stores,
        catalog=catalog_mod.Catalog.build(settings, [resources.Node(name="local", cpu=4,
                                                                    memory_mb=8192)]))
    harness = Harness(store=store, settings=settings, project_id=project_id, root=root,
                      controller=controller.Controller(store, services, stores), policy=policy,
                      stores=stores)
    return harness


def spec(root: pathlib.Path, **over: Any) -> dict[str, Any]:
    """A loop's spec: trains when 4 new samples wait (checked every 10 s), promotes when
    accuracy improves by more than 0.01, no service unless `deploy_template` is given."""
    code = root / "code"
    code.mkdir(exist_ok=True)
    (code / "w.py").write_text("print('hi')\n")
    template = {"algorithm": {"code_dir": str(code), "boot_file": "w.py"},
                "spec": {"resource": {"flavor_id": "corral.cpu.1u"}}}
    out: dict[str, Any] = {
        "dataset": {"name": "stream", "trainProb": 0.5},
        "initialModel": {"name": "m"},
        "trainSpec": {"template": template, "trigger": {
            "checkPeriodSeconds": 10,
            "condition": {"operator": ">=", "threshold": 4, "metric": "num_of_samples"}}},
        "evalSpec": {"template": template},
        "deploySpec": {"model": {"hotUpdateEnabled": True, "pollPeriodSeconds": 1,
                                 "ackTimeoutSeconds": 20},
                       "trigger": {"condition": {"operator": ">", "threshold": 0.01,
                                                 "metric": "accuracy_delta"}}},
        "outputDir": str(root / "out"),
    }
    deploy_template = over.pop("deploy_template", None)
    if deploy_template:
        out["deploySpec"]["template"] = template
    for key, value in over.items():
        out[key] = value
    return out


def expect_error(fn: Any, *args: Any, **kw: Any) -> errors.CorralError:
    try:
        fn(*args, **kw)
    except errors.CorralError as exc:
        return exc
    raise AssertionError("no error")


TERMINAL = {p.value for p in jobs.TERMINAL}
