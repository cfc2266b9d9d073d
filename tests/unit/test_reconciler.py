"""The reconciler over a real store, driven by a fake executor and a fake clock."""

from __future__ import annotations

import dataclasses
import pathlib
import shutil
import threading
import uuid
from collections.abc import Iterator, Mapping
from typing import Any
from unittest import mock

import pytest
import sqlalchemy as sa

from corral import settings as settings_mod
from corral.domain import errors, faults, faultspec, resources, specs
from corral.executors import base
from corral.scheduler import reconciler
from corral.services import catalog as catalog_mod
from corral.services import submit
from corral.storage import runs
from corral.store import db, identity_repo, job_repo
from tests import factories
from tests.conftest import make_settings
from tests.unit import fakes

GRACE = 1.0
NODE = resources.Node(name="local", cpu=2, memory_mb=8192)


@dataclasses.dataclass
class World:
    """One store, one fake machine, one fake clock, and a reconciler over them."""

    tmp: pathlib.Path
    store: db.Store
    fake: fakes.FakeExecutor
    clock: fakes.FakeClock
    settings: settings_mod.Settings
    catalog: catalog_mod.Catalog
    project_id: str
    rec: reconciler.Reconciler
    #: seconds between submissions: distinct create times, and a binary fraction so that
    #: the reconciler's float-to-millisecond rounding stays exact
    submit_gap: float = 1 / 64

    def submit(self, **overrides: Any) -> str:
        """Submit a job built by factories.make_job; a command by default."""
        overrides.setdefault("command", "python train.py")
        body = specs.JobCreate.model_validate(factories.make_job(**overrides))
        with self.store.begin() as conn:
            job_id = submit.create_job(
                conn, self.catalog, body, project_id=self.project_id, now=self.now_ms()
            )
        self.clock.advance(self.submit_gap)
        return job_id

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    def tick(self, times: int = 1) -> None:
        """`times` wake-ups of the scheduler's thread: each a pass, and more passes at once
        while one says there is more to do (as reconciler.run_forever runs them)."""
        for _ in range(times):
            for _more in range(10):
                if not self.rec.tick():
                    break

    def wait_out_backoff(self, restart: int = 1) -> None:
        """Let the default backoff before the `restart`th restart in place pass (5 s, 10 s,
        20 s, ...), then run a pass."""
        self.clock.advance(faults.delay_ms(faultspec.Backoff(), restart) / 1000)
        self.tick()

    def restart(self) -> None:
        """A new server over the same database and the same processes: nothing in memory."""
        self.rec = new_reconciler(self)

    def job(self, job_id: str) -> Any:
        with self.store.read() as conn:
            return job_repo.job_by_id(conn, job_id)

    def phase(self, job_id: str) -> tuple[str, str]:
        row = self.job(job_id)
        return row.phase, row.secondary_phase

    def events(self, job_id: str) -> list[str]:
        with self.store.read() as conn:
            _, rows = job_repo.list_events(conn, job_id, offset=0, limit=1000, order="asc")
        return [r.message for r in rows]

    def attempts(self, job_id: str) -> list[Any]:
        with self.store.read() as conn:
            return job_repo.attempts_of(conn, job_id)

    def tasks(self, job_id: str, attempt: int | None = None) -> list[Any]:
        with self.store.read() as conn:
            return job_repo.tasks_of(conn, job_id, attempt)

    def terminate(self, job_id: str) -> bool:
        with self.store.begin() as conn:
            return job_repo.request_terminate(conn, job_id, self.now_ms(), "Terminate requested")


ENVIRON = {"PATH": "/usr/bin:/bin", "CORRAL_HOME": "/secret"}


def new_reconciler(w: World) -> reconciler.Reconciler:
    return make_reconciler(w.store, w.fake, w.catalog, w.settings, w.clock)


def make_reconciler(
    store: db.Store,
    fake: fakes.FakeExecutor,
    cat: catalog_mod.Catalog,
    settings: settings_mod.Settings,
    clock: fakes.FakeClock,
) -> reconciler.Reconciler:
    return reconciler.Reconciler(
        store=store, executor=fake, catalog=cat, settings=settings, clock=clock, environ=ENVIRON
    )


@pytest.fixture
def world(tmp_path: pathlib.Path) -> Iterator[World]:
    store = db.Store(f"sqlite:///{tmp_path / 'state.db'}")
    store.migrate()
    clock = fakes.FakeClock()
    settings = make_settings(tmp_path / "home", grace_period=GRACE)
    fake = fakes.FakeExecutor(NODE)
    cat = catalog_mod.Catalog.build(settings, [NODE])
    with store.begin() as conn:
        project_id = identity_repo.ensure_default_project(conn, int(clock() * 1000))
    rec = make_reconciler(store, fake, cat, settings, clock)
    yield World(
        tmp=tmp_path,
        store=store,
        fake=fake,
        clock=clock,
        settings=settings,
        catalog=cat,
        project_id=project_id,
        rec=rec,
    )
    store.dispose()


# --- one job from start to end ------------------------------------------------------------


def test_a_job_runs_to_completion(world: World) -> None:
    job_id = world.submit()
    assert world.phase(job_id) == ("Creating", "Creating")

    world.tick()
    assert world.phase(job_id) == ("Running", "Running")
    [launch] = world.fake.launches(job_id)
    assert launch.task == "worker-0"

    world.clock.advance(5)
    world.fake.exit(job_id, code=0)
    world.tick()

    job = world.job(job_id)
    assert (job.phase, job.secondary_phase) == ("Completed", "Completed")
    assert job.end_time - job.start_time == 5000
    events = world.events(job_id)
    assert events[0].startswith("Job created")
    assert events[1:] == [
        "Job queued",
        "Job started: 1 task(s) on local",
        "Task worker-0 exited with code 0",
        "Job completed",
    ]
    [record] = world.attempts(job_id)
    assert record.start_type == "init_or_rescheduled"
    assert record.end_reason == "job completed"
    assert record.end_recover is None
    [task] = world.tasks(job_id)
    assert (task.state, task.exit_code) == ("exited", 0)


def test_watchers_hear_of_each_commit_and_the_kinds_of_the_whole_pass_once_it_is_over(
        world: World) -> None:
    # The job kinds' controllers look up the owner of each job they hear of: told once the
    # pass is over, that look does not run while the pass starts the job it decided on.
    job_id = world.submit()
    told: list[tuple[str, list[str], int]] = []

    def hear(who: str) -> Any:
        return lambda ids, *_moved: told.append((who, sorted(ids),
                                                 len(world.fake.launches(job_id))))

    rec = reconciler.Reconciler(store=world.store, executor=world.fake, catalog=world.catalog,
                                settings=world.settings, clock=world.clock, environ=ENVIRON,
                                on_change=hear("watchers"), on_pass_end=hear("kinds"))
    rec.tick()

    assert told[0] == ("watchers", [job_id], 0)  # its start committed, not yet launched
    assert told[-1] == ("kinds", [job_id], 1)  # launched and recorded
    assert [who for who, _ids, _n in told].count("kinds") == 1


def test_a_finished_job_is_left_alone_by_later_ticks(world: World) -> None:
    job_id = world.submit()
    world.tick()
    world.fake.exit(job_id, code=0)
    world.tick()
    before = world.events(job_id)
    world.tick(3)
    assert world.events(job_id) == before
    assert len(world.fake.launches(job_id)) == 1


def test_the_launch_carries_the_command_env_and_paths(world: World) -> None:
    job_id = world.submit(command="echo hi", parameters={"lr": 0.1}, environments={"SEED": "7"})
    world.tick()
    [spec] = world.fake.launches(job_id)
    assert spec.shell  # a command line, with the parameters as its arguments
    assert spec.argv == ("echo hi", "--lr=0.1")
    assert spec.env["CORRAL_JOB_ID"] == job_id
    assert spec.env["CORRAL_TASK_ID"] == "worker-0"
    assert spec.env["SEED"] == "7"
    assert spec.env["WORLD_SIZE"] == "1"
    assert spec.env["PATH"] == "/usr/bin:/bin"
    assert "CORRAL_HOME" not in spec.env  # the server's own settings never reach a job
    attempt_dir = world.settings.runs_dir / job_id / "attempt-1"
    assert spec.log_path == str(attempt_dir / "logs" / "worker-0.log")
    assert pathlib.Path(spec.cwd).is_dir()


def test_a_failing_job_without_retries_fails_with_its_exit_code(world: World) -> None:
    job_id = world.submit()
    world.tick()
    world.fake.exit(job_id, code=3)
    world.tick()
    job = world.job(job_id)
    assert (job.phase, job.secondary_phase) == ("Failed", "Failed")
    assert job.failure_class == "user_exit"
    [record] = world.attempts(job_id)
    assert record.end_reason == "exit with 3"
    assert record.end_related_task == "worker-0"
    assert record.end_recover is None
    assert "Job failed: worker-0 exit with 3 (user_exit; no retries)" in world.events(job_id)


# --- never over-commit --------------------------------------------------------------------


def test_three_one_core_jobs_on_two_cores_run_two_at_a_time(world: World) -> None:
    a, b, c = (world.submit() for _ in range(3))
    world.tick(3)
    assert [world.phase(j)[0] for j in (a, b, c)] == ["Running", "Running", "Pending"]
    assert world.phase(c) == ("Pending", "Queuing")
    assert len(world.fake.alive()) == 2
    assert world.job(c).wait_reason.startswith("waiting for resources")

    world.fake.exit(b, code=0)
    world.tick()
    assert world.phase(b)[0] == "Completed"
    assert world.phase(c)[0] == "Running"
    assert len(world.fake.alive()) == 2
    assert world.job(c).wait_reason is None


def test_the_waiting_reason_is_an_event_once_not_every_tick(world: World) -> None:
    world.submit(flavor_id="corral.cpu.full")
    waiting = world.submit()
    world.tick(5)
    reasons = [e for e in world.events(waiting) if e.startswith("waiting for resources")]
    assert len(reasons) == 1


def test_jobs_submitted_in_the_same_millisecond_start_in_submission_order(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Job ids are random: here each new one sorts before the previous one.
    ids = iter(str(uuid.UUID(int=n)) for n in range(1000, 0, -1))
    monkeypatch.setattr(job_repo, "new_job_id", lambda: next(ids))
    world.submit_gap = 0
    first, second, third = (world.submit() for _ in range(3))
    assert world.job(first).create_time == world.job(second).create_time
    world.tick()
    assert [world.phase(j)[0] for j in (first, second, third)] == [
        "Running",
        "Running",
        "Pending",
    ]


def test_a_job_behind_a_waiting_big_job_waits_too(world: World) -> None:
    first = world.submit()
    big = world.submit(flavor_id="corral.cpu.full")
    small = world.submit()
    world.tick(2)
    # One core is free and "small" would fit, but "big" came first.
    assert world.phase(first)[0] == "Running"
    assert world.phase(big)[0] == "Pending"
    assert world.phase(small)[0] == "Pending"

    world.fake.exit(first, code=0)
    world.tick()
    assert world.phase(big)[0] == "Running"
    assert world.phase(small)[0] == "Pending"


def test_a_failed_job_gives_its_cores_back(world: World) -> None:
    a, b, c = (world.submit() for _ in range(3))
    world.tick()
    world.fake.exit(a, code=1)
    world.tick()
    assert world.phase(a)[0] == "Failed"
    assert world.phase(c)[0] == "Running"
    assert world.phase(b)[0] == "Running"


# --- gangs --------------------------------------------------------------------------------


def test_a_two_task_gang_starts_both_tasks_together(world: World) -> None:
    job_id = world.submit(node_count=2)
    world.tick()
    launches = {s.task: s for s in world.fake.launches(job_id)}
    assert sorted(launches) == ["worker-0", "worker-1"]
    port = launches["worker-0"].env["MASTER_PORT"]
    assert int(port) > 0
    for rank, name in enumerate(["worker-0", "worker-1"]):
        env = launches[name].env
        assert env["RANK"] == str(rank)
        assert env["WORLD_SIZE"] == "2"
        assert env["MASTER_ADDR"] == "127.0.0.1"
        assert env["MASTER_PORT"] == port  # one rendezvous for the whole gang
        assert env["CORRAL_TASK_ID"] == name
    assert "Job started: 2 task(s) on local" in world.events(job_id)


def test_a_gang_is_not_started_at_all_when_only_one_slot_is_free(world: World) -> None:
    single = world.submit()
    world.tick()
    gang = world.submit(node_count=2)
    world.tick(3)
    assert world.phase(gang) == ("Pending", "Queuing")
    assert world.fake.launches(gang) == []
    assert world.tasks(gang) == []

    world.fake.exit(single, code=0)
    world.tick()
    assert world.phase(gang)[0] == "Running"
    assert len(world.fake.launches(gang)) == 2


def test_a_gang_completes_only_when_every_task_exited_zero(world: World) -> None:
    job_id = world.submit(node_count=2)
    world.tick()
    world.fake.exit(job_id, "worker-1", code=0)
    world.tick(2)
    assert world.phase(job_id)[0] == "Running"
    world.fake.exit(job_id, "worker-0", code=0)
    world.tick()
    assert world.phase(job_id) == ("Completed", "Completed")


def test_when_one_gang_task_fails_the_other_is_stopped_after_the_grace_period(world: World) -> None:
    world.fake.ignore_sigterm = True
    job_id = world.submit(node_count=2)
    world.tick()
    world.fake.exit(job_id, "worker-1", code=3)
    world.tick()
    survivor = world.fake.task(job_id, "worker-0")
    assert survivor.signals == ["SIGTERM"]
    assert world.phase(job_id)[0] == "Running"  # still stopping its other task

    world.clock.advance(GRACE / 2)
    world.tick()
    assert survivor.signals == ["SIGTERM"]  # no SIGKILL before the grace period is over

    world.clock.advance(GRACE / 2)
    world.tick()
    assert survivor.signals == ["SIGTERM", "SIGKILL"]
    world.tick()

    job = world.job(job_id)
    assert (job.phase, job.secondary_phase) == ("Failed", "Failed")
    [record] = world.attempts(job_id)
    # The cause is the task that failed first, not the one corral killed.
    assert record.end_reason == "exit with 3"
    assert record.end_related_task == "worker-1"
    assert world.fake.alive() == []


def test_a_gang_task_that_obeys_sigterm_is_never_killed(world: World) -> None:
    job_id = world.submit(node_count=2)
    world.tick()
    world.fake.exit(job_id, "worker-0", code=1)
    world.tick()
    world.clock.advance(GRACE * 3)
    world.tick(2)
    assert world.fake.task(job_id, "worker-1").signals == ["SIGTERM"]
    assert world.phase(job_id)[0] == "Failed"


def test_the_cause_is_the_task_that_failed_not_the_one_corral_stopped(world: World) -> None:
    # worker-1 fails; worker-0 obeys the SIGTERM that follows within the same millisecond.
    job_id = world.submit(node_count=2)
    world.tick()
    world.fake.exit(job_id, "worker-1", code=3)
    world.tick(2)
    assert world.fake.task(job_id, "worker-0").signals == ["SIGTERM"]
    [record] = world.attempts(job_id)
    assert (record.end_reason, record.end_related_task) == ("exit with 3", "worker-1")


def test_a_failed_gang_with_retries_restarts_both_tasks(world: World) -> None:
    job_id = world.submit(node_count=2, retries=1)
    world.tick()
    world.fake.exit(job_id, "worker-0", code=2)
    world.tick(2)  # worker-1 gets SIGTERM and obeys; then the attempt is over
    world.wait_out_backoff()
    assert world.phase(job_id)[0] == "Running"
    second = [s for s in world.fake.launches(job_id) if s.attempt == 2]
    assert sorted(s.task for s in second) == ["worker-0", "worker-1"]
    first, again = world.attempts(job_id)
    assert (first.end_reason, first.end_related_task) == ("exit with 2", "worker-0")
    assert again.start_type == "restarted"


# --- retries ------------------------------------------------------------------------------


def test_a_failing_task_is_restarted_until_it_succeeds(world: World) -> None:
    job_id = world.submit(retries=2)
    world.tick()
    world.fake.exit(job_id, code=1)
    world.tick()
    world.wait_out_backoff(1)
    assert world.phase(job_id) == ("Running", "Running")
    world.fake.exit(job_id, code=1)
    world.tick()
    world.wait_out_backoff(2)
    world.fake.exit(job_id, code=0)
    world.tick()

    assert world.phase(job_id) == ("Completed", "Completed")
    records = world.attempts(job_id)
    assert [r.start_type for r in records] == ["init_or_rescheduled", "restarted", "restarted"]
    assert [r.end_reason for r in records] == ["exit with 1", "exit with 1", "job completed"]
    assert [r.end_recover for r in records] == ["proc_restart", "proc_restart", None]
    assert [r.end_related_task for r in records] == ["worker-0", "worker-0", None]
    launches = world.fake.launches(job_id)
    assert [s.attempt for s in launches] == [1, 2, 3]
    assert len({s.log_path for s in launches}) == 3  # each attempt keeps its own log
    assert len({s.launch_id for s in launches}) == 3
    restarting = [e for e in world.events(job_id) if e.startswith("Restarting")]
    assert restarting == ["Restarting in 5 s after worker-0 exit with 1 (retry 1 of 2)",
                          "Restarting in 10 s after worker-0 exit with 1 (retry 2 of 2)"]


def test_a_job_fails_when_its_retries_are_spent(world: World) -> None:
    job_id = world.submit(retries=2)
    world.tick()
    for n, code in enumerate((1, 4, 7), 1):
        world.fake.exit(job_id, code=code)
        world.tick()
        world.wait_out_backoff(n)

    job = world.job(job_id)
    assert (job.phase, job.secondary_phase) == ("Failed", "Failed")
    assert len(world.fake.launches(job_id)) == 3
    records = world.attempts(job_id)
    assert [r.end_reason for r in records] == ["exit with 1", "exit with 4", "exit with 7"]
    assert records[-1].end_recover is None
    world.tick(2)
    assert len(world.fake.launches(job_id)) == 3


def test_a_restart_keeps_the_jobs_cores(world: World) -> None:
    job_id = world.submit(retries=1, flavor_id="corral.cpu.full")
    waiting = world.submit()
    world.tick()
    world.fake.exit(job_id, code=1)
    world.tick()
    assert world.phase(waiting)[0] == "Pending"  # while the failed job waits out its backoff
    world.wait_out_backoff()
    # The restarted attempt runs; the job behind it did not slip in between.
    assert world.phase(job_id)[0] == "Running"
    assert world.phase(waiting)[0] == "Pending"
    assert len(world.fake.alive()) == 1


# --- terminate ----------------------------------------------------------------------------


def test_terminate_stops_a_task_that_ignores_sigterm_after_the_grace_period(world: World) -> None:
    world.fake.ignore_sigterm = True
    job_id = world.submit(retries=3)
    world.tick()
    assert world.terminate(job_id)
    assert world.phase(job_id) == ("Terminating", "Terminating")

    world.tick()
    task = world.fake.task(job_id)
    assert task.signals == ["SIGTERM"]
    world.clock.advance(GRACE * 0.75)
    world.tick()
    assert task.signals == ["SIGTERM"]
    assert world.phase(job_id)[0] == "Terminating"

    world.clock.advance(GRACE * 0.25)
    world.tick(2)
    assert task.signals == ["SIGTERM", "SIGKILL"]
    job = world.job(job_id)
    assert (job.phase, job.secondary_phase) == ("Terminated", "Terminated")
    assert job.failure_class == "stopped"
    # Retries were left, but a job a user stopped is never restarted.
    world.tick(3)
    assert len(world.fake.launches(job_id)) == 1
    [record] = world.attempts(job_id)
    assert record.end_reason == "terminated by user"
    assert record.end_recover is None


def test_terminate_of_a_task_that_obeys_sigterm_needs_no_sigkill(world: World) -> None:
    job_id = world.submit()
    world.tick()
    world.terminate(job_id)
    world.tick(2)
    assert world.phase(job_id)[0] == "Terminated"
    assert world.fake.task(job_id).signals == ["SIGTERM"]


def test_terminate_of_a_pending_job_never_launches_it(world: World) -> None:
    world.submit(flavor_id="corral.cpu.full")
    waiting = world.submit()
    world.tick()
    assert world.phase(waiting)[0] == "Pending"
    assert world.terminate(waiting)
    world.tick()
    assert world.phase(waiting) == ("Terminated", "Terminated")
    assert world.fake.launches(waiting) == []
    assert world.attempts(waiting) == []


def test_terminate_before_the_first_tick_never_launches_it(world: World) -> None:
    job_id = world.submit()
    assert world.terminate(job_id)
    world.tick(2)
    assert world.phase(job_id)[0] == "Terminated"
    assert world.fake.launches(job_id) == []


def test_terminate_of_a_finished_job_is_refused(world: World) -> None:
    job_id = world.submit()
    world.tick()
    world.fake.exit(job_id, code=0)
    world.tick()
    assert not world.terminate(job_id)
    assert world.phase(job_id)[0] == "Completed"


def test_a_failure_racing_a_terminate_is_not_restarted(world: World) -> None:
    job_id = world.submit(retries=2)
    world.tick()
    world.fake.exit(job_id, code=1)
    world.terminate(job_id)  # before the reconciler saw the failure
    world.tick(2)
    assert world.phase(job_id)[0] == "Terminated"
    assert len(world.fake.launches(job_id)) == 1


def test_terminated_job_frees_its_cores_for_the_queue(world: World) -> None:
    big = world.submit(flavor_id="corral.cpu.full")
    waiting = world.submit()
    world.tick()
    world.terminate(big)
    world.tick(2)
    assert world.phase(big)[0] == "Terminated"
    assert world.phase(waiting)[0] == "Running"


# --- launch failures ----------------------------------------------------------------------


def test_a_job_whose_code_dir_vanished_fails_to_start(world: World) -> None:
    code = factories.write_code(world.tmp, "print('hi')\n")
    job_id = world.submit(command=None, code_dir=code)
    shutil.rmtree(code)
    copied = threading.Event()
    world.rec.launches.wake = copied.set
    world.tick()  # starts the job; its code is copied aside
    assert copied.wait(10), "the copy never said it was done"
    world.tick()
    job = world.job(job_id)
    assert (job.phase, job.secondary_phase) == ("Failed", "CreateFailed")
    assert job.failure_class == "launch_error"
    assert world.fake.launches(job_id) == []
    [task] = world.tasks(job_id)
    assert task.state == "failed_to_start"
    assert any("failed to start" in e for e in world.events(job_id))


def test_an_executor_that_cannot_start_a_task_fails_the_job(world: World) -> None:
    world.fake.launch_error = "cannot start worker-0: no such interpreter"
    job_id = world.submit()
    world.tick(2)
    assert world.phase(job_id) == ("Failed", "CreateFailed")
    [record] = world.attempts(job_id)
    assert "no such interpreter" in record.end_reason


def test_a_gang_with_one_task_that_cannot_start_stops_the_other(world: World) -> None:
    job_id = world.submit(node_count=2)
    real_launch = world.fake.launch

    def launch(spec: Any) -> Any:
        if spec.task == "worker-1":
            raise errors.LaunchError("cannot start worker-1")
        return real_launch(spec)

    world.fake.launch = launch  # type: ignore[method-assign]
    for _ in range(3):
        world.tick()
        world.clock.advance(1 / 8)
    assert world.fake.task(job_id, "worker-0").signals == ["SIGTERM"]
    assert world.phase(job_id) == ("Failed", "CreateFailed")
    [record] = world.attempts(job_id)
    assert record.end_related_task == "worker-1"


# --- a server restart in the middle -------------------------------------------------------


def crash_while_launching(world: World, when: str, **overrides: Any) -> str:
    """Submit a job and "kill the server" during its launch; return the job id."""
    job_id = world.submit(**overrides)
    world.fake.crash = when
    with pytest.raises(fakes.Crash):
        world.tick()
    [task] = world.tasks(job_id)
    assert task.state == "launching"
    assert task.handle is None
    world.restart()
    return job_id


def test_a_launch_that_never_started_runs_exactly_once_after_a_restart(world: World) -> None:
    job_id = crash_while_launching(world, "before_start")
    [old_id] = [t.launch_id for t in world.tasks(job_id)]

    world.tick()
    assert world.fake.recovered == [old_id]
    [launch] = world.fake.launches(job_id)
    assert launch.launch_id != old_id  # a relaunch never reuses a settled launch id
    world.tick()  # records the handle
    [task] = world.tasks(job_id)
    assert (task.state, task.launch_id) == ("running", launch.launch_id)

    world.tick(2)
    assert len(world.fake.launches(job_id)) == 1
    world.fake.exit(job_id, code=0)
    world.tick()
    assert world.phase(job_id)[0] == "Completed"


def test_a_launch_that_did_start_is_adopted_not_run_again(world: World) -> None:
    job_id = crash_while_launching(world, "after_start")
    started = world.fake.task(job_id)

    world.tick()
    assert world.fake.recovered == [started.spec.launch_id]
    assert len(world.fake.launches(job_id)) == 1
    [task] = world.tasks(job_id)
    assert task.state == "running"
    assert task.handle is not None
    assert world.phase(job_id)[0] == "Running"

    world.tick(2)
    world.fake.exit(job_id, code=0)
    world.tick()
    assert world.phase(job_id)[0] == "Completed"
    assert len(world.fake.launches(job_id)) == 1


def test_a_launch_that_ended_while_the_server_was_down_gets_its_exit_code(world: World) -> None:
    job_id = crash_while_launching(world, "after_start")
    world.fake.exit(job_id, code=0)
    world.tick()
    assert world.phase(job_id) == ("Completed", "Completed")
    [task] = world.tasks(job_id)
    assert (task.state, task.exit_code) == ("exited", 0)
    assert len(world.fake.launches(job_id)) == 1


def test_a_launch_that_failed_while_the_server_was_down_is_retried(world: World) -> None:
    job_id = crash_while_launching(world, "after_start", retries=1)
    world.fake.exit(job_id, code=9)
    world.tick()
    world.wait_out_backoff()
    assert world.phase(job_id)[0] == "Running"
    assert [s.attempt for s in world.fake.launches(job_id)] == [1, 2]
    assert world.attempts(job_id)[0].end_reason == "exit with 9"


def test_a_gang_half_launched_before_a_crash_is_completed_not_doubled(world: World) -> None:
    job_id = world.submit(node_count=2)
    real_launch = world.fake.launch

    def launch(spec: Any) -> Any:
        if spec.task == "worker-1":
            raise fakes.Crash(spec.launch_id)
        return real_launch(spec)

    world.fake.launch = launch  # type: ignore[method-assign]
    with pytest.raises(fakes.Crash):
        world.tick()
    del world.fake.launch
    world.restart()
    world.tick(2)
    launched = [s.task for s in world.fake.launches(job_id)]
    assert sorted(launched) == ["worker-0", "worker-1"]
    assert {t.state for t in world.tasks(job_id)} == {"running"}


def test_a_stop_requested_while_the_server_was_down_never_starts_the_launch(world: World) -> None:
    job_id = crash_while_launching(world, "before_start")
    world.terminate(job_id)
    world.tick(2)
    assert world.phase(job_id)[0] == "Terminated"
    assert world.fake.launches(job_id) == []


def left_ahead_by_an_earlier_version(world: World, *, ran: bool) -> tuple[str, str]:
    """A job still waiting, with a task row `launching` for its first attempt: what corral
    0.1 left when it stopped while it held a queued job's launch ahead of a running task's
    end. `ran`: its launcher started it meanwhile. Returns the job and the launch id."""
    blocker = world.submit(flavor_id="corral.cpu.full")
    job_id = world.submit()
    world.tick()
    assert world.phase(job_id)[0] == "Pending"
    task = factories.make_task(job_id, state="launching")
    with world.store.begin() as conn:
        job_repo.insert_tasks(conn, [task])
    if ran:
        world.fake.launch(world.rec.launches.bare_spec(task))
    world.fake.exit(blocker)
    world.restart()
    return job_id, task.launch_id


def test_a_launch_an_earlier_version_held_ahead_and_never_ran_is_dropped(world: World) -> None:
    job_id, launch_id = left_ahead_by_an_earlier_version(world, ran=False)
    world.tick()  # the old launch goes, and the job starts the ordinary way
    assert world.phase(job_id)[0] == "Running"
    assert launch_id in world.fake.never_started
    [launch] = world.fake.launches(job_id)
    assert launch.launch_id != launch_id
    world.fake.exit(job_id)
    world.tick()
    assert world.phase(job_id)[0] == "Completed"
    assert len(world.attempts(job_id)) == 1


def test_a_launch_an_earlier_version_held_ahead_that_ran_is_the_jobs_start(world: World) -> None:
    job_id, launch_id = left_ahead_by_an_earlier_version(world, ran=True)
    world.tick()
    assert world.phase(job_id)[0] == "Running"
    assert [t.launch_id for t in world.fake.launches(job_id)] == [launch_id]  # not twice
    [task] = world.tasks(job_id)
    assert task.state == "running"
    world.fake.exit(job_id, code=0)
    world.tick()
    assert world.phase(job_id) == ("Completed", "Completed")
    assert [a.end_reason for a in world.attempts(job_id)] == ["job completed"]


def test_a_running_task_is_adopted_after_a_restart(world: World) -> None:
    job_id = world.submit()
    world.tick(2)  # started, then its handle recorded
    [launch] = world.fake.launches(job_id)
    world.restart()
    world.tick(2)
    assert launch.launch_id in world.fake.adopted
    assert world.phase(job_id)[0] == "Running"
    world.fake.exit(job_id, code=0)
    world.tick()
    assert world.phase(job_id)[0] == "Completed"
    assert len(world.fake.launches(job_id)) == 1


def test_a_running_task_lost_during_a_restart_makes_the_job_abnormal(world: World) -> None:
    job_id = world.submit()
    world.tick()
    world.fake.lose(job_id)
    world.restart()
    world.tick()
    job = world.job(job_id)
    assert (job.phase, job.secondary_phase) == ("Abnormal", "Lost")
    assert job.failure_class == "lost"
    [task] = world.tasks(job_id)
    assert (task.state, task.exit_code) == ("lost", None)
    [record] = world.attempts(job_id)
    assert (record.end_reason, record.end_related_task) == ("lost", "worker-0")
    assert any(e.startswith("Task worker-0 lost") for e in world.events(job_id))


def test_a_lost_task_with_retries_left_is_restarted(world: World) -> None:
    job_id = world.submit(retries=1)
    world.tick()
    world.fake.lose(job_id)
    world.restart()
    world.tick()
    world.wait_out_backoff()
    assert world.phase(job_id) == ("Running", "Running")
    first, second = world.attempts(job_id)
    assert (first.end_reason, first.end_recover) == ("lost", "proc_restart")
    assert second.start_type == "restarted"
    assert [s.attempt for s in world.fake.launches(job_id)] == [1, 2]


def test_queued_jobs_start_after_a_restart_as_if_nothing_happened(world: World) -> None:
    running = world.submit(flavor_id="corral.cpu.full")
    queued = world.submit()
    world.tick()
    world.restart()
    world.tick()
    assert world.phase(queued)[0] == "Pending"
    world.fake.exit(running, code=0)
    world.tick()
    assert world.phase(queued)[0] == "Running"
    assert len(world.fake.launches()) == 2


# --- deleted jobs -------------------------------------------------------------------------


def finish_and_delete(world: World) -> tuple[str, pathlib.Path]:
    """A job run to its end, then deleted as the API deletes one; and its run directory."""
    job_id = world.submit()
    world.tick()
    world.fake.exit(job_id, code=0)
    world.tick()
    job_dir = world.settings.runs_dir / job_id
    assert job_dir.is_dir()
    with world.store.begin() as conn:
        job_repo.mark_deleted(conn, job_id, world.now_ms())
    return job_id, job_dir


def test_a_deleted_finished_job_is_purged_with_its_files(world: World) -> None:
    job_id, job_dir = finish_and_delete(world)
    world.tick()
    assert world.job(job_id) is None
    factories.wait_for(lambda: not job_dir.exists(), what="the job's files to go")


def test_files_of_a_job_purged_just_before_the_server_died_go_on_its_next_start(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    job_id, job_dir = finish_and_delete(world)
    # The server dies once the purge has committed, before its files thread removes them.
    monkeypatch.setattr(runs, "remove_job_dir", lambda paths: None)
    world.tick()
    assert world.job(job_id) is None
    world.rec.files.drain(10)
    assert job_dir.is_dir()
    monkeypatch.undo()
    # Left alone: a job's directory whose purge did not commit (its row is still there), and
    # one the database never knew, which may be another database's.
    kept = world.submit()
    world.tick()
    runs.mark_purged(runs.RunPaths(world.settings.runs_dir, kept))
    stranger = world.settings.runs_dir / "0f1e2d3c-0000-4000-8000-000000000000"
    (stranger / "attempt-1" / "logs").mkdir(parents=True)
    world.restart()
    world.tick()
    world.rec.files.drain(10)
    assert not job_dir.exists()
    assert (world.settings.runs_dir / kept).is_dir() and stranger.is_dir()


def test_a_deleted_running_job_is_stopped_before_it_is_purged(world: World) -> None:
    job_id = world.submit()
    world.tick()
    with world.store.begin() as conn:
        job_repo.request_terminate(conn, job_id, world.now_ms(), "deleted")
        job_repo.mark_deleted(conn, job_id, world.now_ms())
    world.tick()
    assert world.fake.task(job_id).signals == ["SIGTERM"]
    world.tick()
    assert world.job(job_id) is None
    assert world.fake.alive() == []


def test_a_pass_whose_scheduling_fails_still_carries_out_what_it_committed(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first transaction committed a task's end: it is released (and what it left
    cleaned up) even when the queue's step then fails, and nothing is launched for a start
    that never committed."""
    done = world.submit()
    world.tick()
    world.fake.exit(done, code=1)
    waiting = world.submit()

    def broken(*_args: Any) -> bool:
        raise sa.exc.OperationalError("SELECT", {}, Exception("database is locked"))

    monkeypatch.setattr(world.rec.admission, "schedule", broken)
    with pytest.raises(sa.exc.OperationalError):
        world.tick()
    assert world.phase(done)[0] == "Failed"
    [task] = world.fake.launches(done)
    assert task.launch_id in world.fake.released and task.launch_id in world.fake.cleaned
    assert world.fake.launches(waiting) == []
    monkeypatch.undo()
    world.tick()
    assert world.phase(waiting)[0] == "Running"


# --- telling who waits on a job ----------------------------------------------------------


def test_each_pass_tells_which_jobs_it_changed_once_they_are_committed(world: World) -> None:
    told: list[dict[str, str]] = []

    def on_change(job_ids: Any, moved: Mapping[str, str]) -> None:
        # each job's phase as another connection sees it; the pass says the phase each
        # job it moved was moved to
        told.append({j: world.phase(j)[0] for j in job_ids})
        assert moved == {j: phase for j, phase in told[-1].items() if j in moved}
        moves.update(moved)

    moves: dict[str, str] = {}

    world.rec.on_change = on_change
    job_id, other = world.submit(), world.submit(flavor_id="corral.cpu.full")

    world.tick()  # the first starts, the second waits for it
    assert told == [{job_id: "Running", other: "Pending"}]
    assert moves == {job_id: "Running", other: "Pending"}

    told.clear()
    world.tick()  # nothing changed
    assert told == []

    world.fake.exit(job_id, code=0)
    world.tick()  # the first completes (first transaction), the second starts (second)
    assert told == [{job_id: "Completed"}, {other: "Running"}]
    assert moves == {job_id: "Completed", other: "Running"}


def test_a_jobs_submission_and_passes_build_no_sql_statement(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    # Building a statement and its cache key cost about 0.1 ms of CPU a statement here,
    # more than running it: the statements a job's submission and its scheduler passes run
    # are built once, when their module loads (a watched job was 3.6-4.5 ms slower when
    # about twenty of them were built on every call).
    world.submit()  # the first of each: imports, the compiled cache
    world.tick()
    world.fake.exit(world.fake.launches()[0].job_id, code=0)
    world.tick()
    built: list[str] = []

    def counting(cls: type, name: str) -> None:
        original = getattr(cls, name)

        def count(self: Any, *args: Any, **kwargs: Any) -> Any:
            built.append(type(self).__name__)
            return original(self, *args, **kwargs)

        monkeypatch.setattr(cls, name, count)

    for cls in (sa.sql.selectable.Select, sa.sql.dml.Insert, sa.sql.dml.Update,
                sa.sql.dml.Delete, sa.sql.elements.TextClause):
        counting(cls, "__init__")
    counting(sa.sql.base.Generative, "_generate")  # .where() and the like on a built one

    job_id = world.submit()
    world.tick()
    world.clock.advance(5)
    world.fake.exit(job_id, code=0)
    world.tick()

    assert world.phase(job_id) == ("Completed", "Completed")
    assert built == []


def _note_in_transaction(world: World) -> list[tuple[str, bool]]:
    """Each adopt and recover the executor is asked from now on, and whether a write
    transaction was open then (SQLite: the thread holds the store's write lock)."""
    noted: list[tuple[str, bool]] = []
    lock = world.store._write_lock
    adopt, recover = world.fake.adopt, world.fake.recover

    def noted_adopt(handle: base.Handle) -> base.Status:
        noted.append(("adopt", lock._is_owned()))  # type: ignore[attr-defined]
        return adopt(handle)

    def noted_recover(spec: base.LaunchSpec) -> base.Status:
        noted.append(("recover", lock._is_owned()))  # type: ignore[attr-defined]
        return recover(spec)

    world.fake.adopt = noted_adopt  # type: ignore[method-assign]
    world.fake.recover = noted_recover  # type: ignore[method-assign]
    return noted


def test_adopting_and_recovering_ask_the_executor_outside_the_write_transaction(
        world: World) -> None:
    """On a cluster each is a round trip to a node (seconds where it is slow): asked inside
    the pass's write transaction, they held every other writer back, the renewal of the
    server's lease among them."""
    in_transaction = _note_in_transaction(world)
    running = world.submit()
    world.tick(2)  # started, its handle recorded
    cut_short = crash_while_launching(world, "after_start")  # a restart too
    world.tick(2)
    assert sorted(in_transaction) == [("adopt", False), ("adopt", False), ("recover", False)]
    assert world.phase(running)[0] == world.phase(cut_short)[0] == "Running"
    assert len(world.fake.launches()) == 2
    world.tick(3)  # every live task known: asked nothing more
    assert len(in_transaction) == 3


def test_a_pass_that_failed_before_or_after_asking_leaves_the_asking_to_the_next(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pass that could not read the live tasks, or whose launches' handles were not
    recorded, leaves the next pass to ask about them before its transaction too."""
    in_transaction = _note_in_transaction(world)
    running = world.submit()
    world.tick(2)
    world.restart()
    real = job_repo.live_tasks
    monkeypatch.setattr(job_repo, "live_tasks", mock.Mock(side_effect=sa.exc.OperationalError(
        "SELECT", {}, Exception("database is locked"))))
    with pytest.raises(sa.exc.OperationalError):
        world.tick()
    monkeypatch.setattr(job_repo, "live_tasks", real)
    world.tick()
    assert in_transaction == [("adopt", False)]
    assert world.phase(running)[0] == "Running"

    later = world.submit()
    monkeypatch.setattr(world.rec.launches, "record", mock.Mock(side_effect=RuntimeError))
    with pytest.raises(RuntimeError):
        world.tick()  # launched, its handle not recorded
    monkeypatch.undo()
    world.tick(2)  # recovered (this server launched it: polled from then on)
    assert in_transaction == [("adopt", False), ("recover", False)]
    assert world.phase(later)[0] == "Running" and len(world.fake.launches(later)) == 1


def test_a_task_not_adopted_for_sure_is_asked_again_outside_the_transaction(
        world: World) -> None:
    """An executor that cannot tell yet (a node's agent slow to answer) says the task runs,
    unsure: it is adopted again by the next pass, before its transaction, and the job runs
    on (neither lost nor polled as if adopted)."""
    in_transaction = _note_in_transaction(world)
    job_id = world.submit()
    world.tick(2)
    world.restart()
    noted_adopt = world.fake.adopt
    unsure = [True]

    def slow_first(handle: base.Handle) -> base.Status:
        status = noted_adopt(handle)
        if unsure.pop() if unsure else False:
            return dataclasses.replace(status, unsure=True, message="no answer in 30 s")
        return status

    world.fake.adopt = slow_first  # type: ignore[method-assign]
    world.tick()
    assert in_transaction == [("adopt", False)]
    assert world.phase(job_id)[0] == "Running"
    world.tick()
    assert in_transaction == [("adopt", False), ("adopt", False)]
    world.tick(2)  # adopted for sure: polled from then on
    assert len(in_transaction) == 2
    world.fake.exit(job_id, code=0)
    world.tick()
    assert world.phase(job_id)[0] == "Completed"


def test_a_task_polled_but_no_longer_tracked_for_sure_is_adopted_again(world: World) -> None:
    """A poll the executor could answer only by adopting the task again, and could not yet
    (a cluster's driver restarted, its agent slow): the next pass adopts it, before its
    transaction, instead of polling it as if it were tracked."""
    in_transaction = _note_in_transaction(world)
    job_id = world.submit()
    world.tick(2)
    poll = world.fake.poll
    unsure = [True]

    def poll_once_unsure(handle: base.Handle) -> base.Status:
        status = poll(handle)
        return dataclasses.replace(status, unsure=True) if unsure and unsure.pop() else status

    world.fake.poll = poll_once_unsure  # type: ignore[method-assign]
    world.tick()
    assert in_transaction == []
    world.tick()
    assert in_transaction == [("adopt", False)] and world.phase(job_id)[0] == "Running"
