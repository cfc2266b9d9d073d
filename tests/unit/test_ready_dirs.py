"""Run directories made ahead of time (storage.ReadyDirs), on a real directory."""

from __future__ import annotations

import os
import pathlib
import time

import pytest

from corral.domain import specs
from corral.scheduler import launching
from corral.storage import local as storage
from tests import factories
from tests.unit.test_reconciler_scheduling import make_world


def inodes(ready: storage.ReadyDirs) -> set[int]:
    return {os.stat(e.path).st_ino for e in os.scandir(ready.root)}


def wait_ready(ready: storage.ReadyDirs, n: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while ready.ready() < n:
        assert time.monotonic() < deadline, f"only {ready.ready()} ready"
        time.sleep(0.01)


@pytest.fixture
def runs(tmp_path: pathlib.Path) -> pathlib.Path:
    (tmp_path / "runs").mkdir()
    return tmp_path / "runs"


def test_a_first_attempt_takes_a_ready_directory_whole(runs: pathlib.Path) -> None:
    ready = storage.ReadyDirs(runs, keep=3)
    ready.fill()
    assert ready.ready() == 3
    made = inodes(ready)
    paths = storage.RunPaths(runs, "job-1")
    paths.make_attempt_dirs(1, ready)
    assert os.stat(paths.job_dir).st_ino in made  # moved, not made
    assert sorted(p.name for p in paths.attempt_dir(1).iterdir()) == ["ctl", "logs",
                                                                        "metrics"]
    assert paths.log_path(1, "worker-0").read_bytes() == b""
    assert ready.ready() == 2
    # Later attempts make their own: the job's directory exists.
    paths.make_attempt_dirs(2, ready)
    assert sorted(p.name for p in paths.attempt_dir(2).iterdir()) == ["ctl", "logs",
                                                                        "metrics"]
    assert ready.ready() == 2
    wait_ready(ready, 3)  # the take asked for one more
    ready.close()


def test_a_job_directory_with_files_in_it_is_kept_and_the_ready_one_too(
        runs: pathlib.Path) -> None:
    ready = storage.ReadyDirs(runs, keep=1)
    ready.fill()
    paths = storage.RunPaths(runs, "job-1")
    (paths.job_dir / "inputs").mkdir(parents=True)  # fetched inputs, say
    assert not ready.take(paths.job_dir)
    assert ready.ready() == 1
    paths.make_attempt_dirs(1, ready)
    assert (paths.job_dir / "inputs").is_dir() and paths.control_dir(1).is_dir()
    assert ready.ready() == 1
    ready.close()


def test_none_ready_makes_them_itself_and_starts_filling(runs: pathlib.Path) -> None:
    ready = storage.ReadyDirs(runs, keep=2)
    paths = storage.RunPaths(runs, "job-1")
    paths.make_attempt_dirs(1, ready)
    assert paths.control_dir(1).is_dir()
    wait_ready(ready, 2)
    assert len(os.listdir(ready.root)) == 2
    ready.close()


def test_a_new_server_takes_in_what_the_last_one_made_and_drops_the_half_made(
        runs: pathlib.Path) -> None:
    first = storage.ReadyDirs(runs, keep=2)
    first.fill()
    made = inodes(first)
    (first.root / "tmp-half").mkdir()  # a server killed while making one
    second = storage.ReadyDirs(runs, keep=2)
    second.fill()
    assert second.ready() == 2 and inodes(second) == made
    assert not (second.root / "tmp-half").exists()


def test_prepare_attempt_takes_one(runs: pathlib.Path) -> None:
    ready = storage.ReadyDirs(runs, keep=1)
    ready.fill()
    made = inodes(ready)
    alg = specs.JobCreate.model_validate(factories.make_job(command="true")).algorithm
    paths = storage.RunPaths(runs, "job-1")
    _code, cwd = launching.prepare_attempt(paths, 1, alg, ready=ready)
    assert cwd == paths.attempt_dir(1)
    assert os.stat(paths.job_dir).st_ino in made
    ready.close()


def test_the_scheduler_starts_a_job_in_a_ready_directory(tmp_path: pathlib.Path) -> None:
    world = make_world(tmp_path)
    world.rec._ready.fill()
    made = inodes(world.rec._ready)
    job = world.submit()
    world.tick()
    assert world.phase(job)[0] == "Running"
    paths = storage.RunPaths(world.settings.runs_dir, job)
    assert os.stat(paths.job_dir).st_ino in made
    assert paths.control_dir(1).is_dir()
    world.rec.close()
    world.store.dispose()
