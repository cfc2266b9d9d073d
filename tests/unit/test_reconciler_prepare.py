"""An attempt's code is copied aside from the scheduler's thread: a big `code_dir` never
holds up the other jobs (their exits, stops and starts), a job stopped while its code is
copied never starts, and a server stopped meanwhile prepares the attempt again without
running anything twice; an executor that ships code (a Ray cluster) gets it on the same
thread, ahead of the launch. The copy is held on an Event here, as gigabytes would hold it."""

from __future__ import annotations

import pathlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from corral.domain import errors
from corral.storage import runs
from corral.store import job_repo
from tests import factories
from tests.unit import fakes
from tests.unit.test_reconciler import World, finish_and_delete
from tests.unit.test_reconciler_scheduling import make_world


class Held:
    """runs.<name>, held until `release` (at most 30 s, so that a scheduler that does
    this work on its own thread fails the test instead of hanging it). `entered` counts
    the calls; `calls` names them in the order they were let through, a list that several
    Held may share; `stops`: a snapshot also ends, with LaunchError, once it is cancelled."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, name: str,
                 calls: list[str] | None = None, *, released: bool = False,
                 stops: bool = False) -> None:
        self.release = threading.Event()
        if released:
            self.release.set()
        self.started = threading.Event()
        self.finished = threading.Event()
        self.entered = 0
        self.calls = [] if calls is None else calls
        real = getattr(runs, name)

        def held(*args: Any) -> None:
            self.entered += 1
            self.started.set()
            # `stops`: a copy stopped meanwhile ends, as a real one does (runs.snapshot
            # asks `cancelled` every CANCEL_POLL_S); else it ends when released
            cancelled = args[2] if stops and name == "snapshot" else None
            deadline = time.monotonic() + 30
            while not self.release.wait(runs.CANCEL_POLL_S) and time.monotonic() < deadline:
                if cancelled is not None and cancelled():
                    self.finished.set()
                    raise errors.LaunchError("copying code_dir was cancelled")
            self.calls.append(name)
            try:
                real(*args)
            finally:
                self.finished.set()

        monkeypatch.setattr(runs, name, held)


@pytest.fixture
def world(tmp_path: pathlib.Path) -> Iterator[World]:
    w = make_world(tmp_path)
    yield w
    w.store.dispose()


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Iterator[Held]:
    copy = Held(monkeypatch, "snapshot")
    yield copy
    copy.release.set()


@pytest.fixture
def woken(world: World) -> threading.Event:
    """Set when the reconciler asks for a pass (as the server's wake-up does)."""
    event = threading.Event()
    world.rec.launches.wake = event.set
    return event


def code_job(world: World) -> str:
    code = factories.write_code(world.tmp, "print('hi')\n")
    return world.submit(command=None, code_dir=code)


def test_the_other_jobs_go_on_while_a_code_dir_is_copied(
        world: World, held: Held, woken: threading.Event) -> None:
    running = world.submit()
    world.tick()
    assert world.fake.launches(running)
    big = code_job(world)
    world.tick()  # starts it: 1 core of 2 is free
    assert held.started.wait(10)
    assert world.phase(big) == ("Running", "Running")
    assert world.fake.launches(big) == []  # nothing launched before its code is there
    assert not held.finished.is_set(), "the pass waited for the copy"

    # Meanwhile the scheduler answers: the running job is stopped and a new one starts
    # in its place, while the copy is still held.
    assert world.terminate(running)
    world.tick(2)
    assert world.phase(running)[0] == "Terminated"
    queued = world.submit()
    world.tick()
    assert world.fake.launches(queued)
    world.fake.exit(queued)
    world.tick()
    assert world.phase(queued)[0] == "Completed"
    assert world.fake.launches(big) == [] and not held.finished.is_set()

    held.release.set()
    assert woken.wait(10), "a finished copy did not ask for a pass"
    world.tick()
    [launch] = world.fake.launches(big)
    assert pathlib.Path(launch.cwd) == world.settings.runs_dir / big / "attempt-1" / "code"
    assert (pathlib.Path(launch.cwd) / "train.py").read_text() == "print('hi')\n"
    world.fake.exit(big)
    world.tick()
    assert world.phase(big)[0] == "Completed"
    assert len(world.fake.launches(big)) == 1 and held.entered == 1


def test_a_job_stopped_while_its_code_is_copied_never_starts(
        world: World, held: Held) -> None:
    big = code_job(world)
    world.tick()
    assert held.started.wait(10)
    assert world.terminate(big)
    world.tick()  # settled at once: the copy is not waited for
    assert world.phase(big) == ("Terminated", "Terminated")
    [task] = world.tasks(big)
    assert task.state == "failed_to_start" and "stopped first" in task.message
    held.release.set()
    assert held.finished.wait(10)
    world.tick(2)
    assert world.fake.launches(big) == []
    # The copy stopped short of the snapshot, or it ran before the cancel was seen; either
    # way nothing half-made is left to be taken for a snapshot.
    attempt = world.settings.runs_dir / big / "attempt-1"
    assert not [p for p in attempt.iterdir() if p.name.startswith(".code.tmp")]


def test_a_job_deleted_while_its_code_is_copied_leaves_no_directory_behind(
        world: World, held: Held) -> None:
    big = code_job(world)
    world.tick()
    assert held.started.wait(10)
    with world.store.begin() as conn:  # deleted while its copy runs, as the API does it
        job_repo.request_terminate(conn, big, world.now_ms(), "deleted")
        job_repo.mark_deleted(conn, big, world.now_ms())
    world.tick(2)  # stopped at once, then purged: its files are to go
    assert world.job(big) is None
    # Not while the copy runs: it would make the attempt's directory again after.
    assert not world.rec.files.drain(0.5)
    held.release.set()  # the copy goes on to its first file, sees it is stopped, and ends
    assert held.finished.wait(10)
    assert world.rec.files.drain(10)
    assert not (world.settings.runs_dir / big).exists()


def test_a_server_stopped_while_code_is_copied_prepares_it_again_and_runs_it_once(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    held = Held(monkeypatch, "snapshot", stops=True)
    big = code_job(world)
    world.tick()
    assert held.started.wait(10)
    world.rec.close()  # the server stops; its copy stops
    world.restart()
    woken = threading.Event()
    world.rec.launches.wake = woken.set
    held.release.set()
    world.tick()  # the launch was never sent: settled as not started, prepared again
    assert woken.wait(10)
    world.tick()
    launches = world.fake.launches(big)
    assert len(launches) == 1
    world.fake.exit(big)
    world.tick()
    assert world.phase(big)[0] == "Completed"
    assert held.entered == 2


def test_a_scheduler_that_stops_returns_once_its_copies_have_ended(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """A term that ends (the server stops, or loses its lease and gains it again) stops
    its copies and waits for them: the next term may copy the same attempt at once, and a
    copy still running beside it, in the same folder under the same temporary name,
    removed the new copy's files (the job then failed to start)."""
    held = Held(monkeypatch, "snapshot", stops=True)
    code_job(world)
    world.tick()
    assert held.started.wait(10)
    world.rec.close()
    assert held.finished.is_set(), "the stopped copy still runs"


def test_an_executor_that_ships_code_gets_it_ahead_of_the_launch_off_the_schedulers_thread(
        world: World, woken: threading.Event) -> None:
    staged: list[tuple[str, str, str, int]] = []

    def stage_code(node: str, code_dir: str) -> None:  # as a Ray cluster ships it
        staged.append((node, code_dir, threading.current_thread().name,
                       len(world.fake.launches())))

    world.fake.stage_code = stage_code  # type: ignore[attr-defined]
    big = code_job(world)
    world.tick()
    assert woken.wait(10)
    world.tick()
    [launch] = world.fake.launches(big)
    [(node, code_dir, thread, launched_before)] = staged
    assert (node, code_dir) == (launch.node, launch.cwd) and launched_before == 0
    assert thread != threading.current_thread().name


def test_a_relaunch_after_a_restart_ships_the_code_off_the_schedulers_thread(
        world: World, woken: threading.Event) -> None:
    staged: list[tuple[str, int]] = []

    def stage_code(node: str, code_dir: str) -> None:  # as a Ray cluster ships it
        staged.append((threading.current_thread().name, len(world.fake.launches())))

    world.fake.stage_code = stage_code  # type: ignore[attr-defined]
    big = code_job(world)
    world.tick()
    assert woken.wait(10)
    world.fake.crash = "before_start"  # the server dies as it launches the copied attempt
    with pytest.raises(fakes.Crash):
        world.tick()
    staged.clear()
    world.restart()  # the snapshot is there; what was shipped went with the server
    woken.clear()
    world.rec.launches.wake = woken.set
    world.tick()
    assert woken.wait(10)
    world.tick()
    assert len(world.fake.launches(big)) == 1
    [(thread, launched_before)] = staged
    assert thread != threading.current_thread().name and launched_before == 0


def test_code_that_cannot_be_shipped_fails_the_start(
        world: World, woken: threading.Event) -> None:
    def stage_code(node: str, code_dir: str) -> None:
        raise errors.LaunchError("cannot ship the code to Ray: the object store is full")

    world.fake.stage_code = stage_code  # type: ignore[attr-defined]
    big = code_job(world)
    world.tick()
    assert woken.wait(10)
    world.tick()
    assert world.phase(big) == ("Failed", "CreateFailed")
    assert world.fake.launches(big) == []
    assert any("the object store is full" in e for e in world.events(big))


# --- the other file work: exporting logs, removing a deleted job's files ------------------


def test_removing_a_deleted_jobs_files_does_not_hold_up_the_scheduler(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    removal = Held(monkeypatch, "remove_job_dir")
    gone, job_dir = finish_and_delete(world)
    world.tick()  # purged; its files are removed aside
    assert world.job(gone) is None and removal.calls == []
    other = world.submit()
    world.tick()
    assert world.fake.launches(other)  # the scheduler goes on meanwhile
    removal.release.set()
    factories.wait_for(lambda: not job_dir.exists(), what="the deleted job's files to go")
    assert removal.calls == ["remove_job_dir"]


def test_a_deleted_jobs_logs_are_exported_before_its_files_go_and_a_stop_waits_for_both(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    exports = Held(monkeypatch, "export_logs")
    Held(monkeypatch, "remove_job_dir", exports.calls, released=True)
    export = world.tmp / "exported"
    job = world.submit(spec={"resource": {"flavor_id": "corral.cpu.1u", "node_count": 1},
                             "log_export_path": {"host_path": str(export)}})
    world.tick()
    log = world.settings.runs_dir / job / "attempt-1" / "logs" / "worker-0.log"
    log.write_text("the last words\n")
    with world.store.begin() as conn:  # deleted while it runs, as the API does it
        job_repo.request_terminate(conn, job, world.now_ms(), "deleted")
        job_repo.mark_deleted(conn, job, world.now_ms())
    world.tick(3)  # stopped, ended, purged: its export and removal are queued, in order
    assert world.job(job) is None and exports.calls == []
    threading.Timer(0.2, exports.release.set).start()
    world.rec.close()  # a stopping server waits for them
    assert exports.calls == ["export_logs", "remove_job_dir"]
    assert (export / "attempt-1" / "worker-0.log").read_text() == "the last words\n"
    assert not (world.settings.runs_dir / job).exists()
