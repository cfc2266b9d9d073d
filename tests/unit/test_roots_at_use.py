"""The paths a job named are checked against its project's storage roots again as its
attempt is prepared: a link a job put in one since it was submitted reaches nothing
outside them (another project's files among what lies there)."""

from __future__ import annotations

import pathlib
import threading
from collections.abc import Iterator

import pytest

from corral.domain import errors, specs
from corral.scheduler import launching
from corral.services import jobpaths
from corral.storage import paths as storage_paths
from corral.storage import runs
from tests import conftest, factories
from tests.unit.test_reconciler import World
from tests.unit.test_reconciler_scheduling import make_world


@pytest.fixture
def data(tmp_path: pathlib.Path) -> pathlib.Path:
    """The storage root; beside it, `elsewhere/` (another project's, say) with code in it."""
    (tmp_path / "data").mkdir()
    factories.write_code(tmp_path / "elsewhere", "print('not yours')\n")
    return tmp_path / "data"


def closed_policy(tmp_path: pathlib.Path, data: pathlib.Path) -> storage_paths.Policy:
    settings = conftest.make_settings(tmp_path / "home", storage={
        "roots": [str(data)], "open_default_project": False})
    return storage_paths.policy_for(settings, project_id="p" * 32, project_name="vision",
                                    is_default=False)


def test_a_code_dir_made_a_link_out_of_the_roots_is_refused_when_used(
        tmp_path: pathlib.Path, data: pathlib.Path) -> None:
    code = factories.write_code(data, "print('mine')\n")
    alg = specs.Algorithm(code_dir=str(code), boot_file="train.py")
    paths = runs.RunPaths(tmp_path / "runs", "job-1")
    policy = closed_policy(tmp_path, data)
    code.rename(data / "was")
    code.symlink_to(next((tmp_path / "elsewhere").iterdir()))
    with pytest.raises(errors.BadParameter, match="outside the storage"):
        launching.prepare_attempt(paths, 1, alg, policy=policy)
    assert not paths.code_dir(1).exists()


def test_an_output_under_a_link_out_of_the_roots_is_not_made(
        tmp_path: pathlib.Path, data: pathlib.Path) -> None:
    (data / "shared").symlink_to(tmp_path / "elsewhere")
    alg = specs.Algorithm.model_validate(
        factories.make_job(command="true", outputs={"o": str(data / "shared" / "out")})
        ["algorithm"])
    paths = runs.RunPaths(tmp_path / "runs", "job-1")
    with pytest.raises(errors.BadParameter, match="output 'o'"):
        launching.prepare_attempt(paths, 1, alg, policy=closed_policy(tmp_path, data))
    assert not (tmp_path / "elsewhere" / "out").exists()


@pytest.fixture
def world(tmp_path: pathlib.Path, data: pathlib.Path) -> Iterator[World]:
    w = make_world(tmp_path, storage={"roots": [str(data)], "open_default_project": False})
    # What the server gives the reconciler: each project's roots, from the store.
    w.rec.launches.policies = jobpaths.Policies(w.store, w.settings)
    yield w
    w.store.dispose()


def test_a_queued_jobs_code_dir_made_a_link_out_of_the_roots_fails_its_start(
        world: World, data: pathlib.Path, tmp_path: pathlib.Path) -> None:
    code = factories.write_code(data, "print('mine')\n")
    job = world.submit(command=None, code_dir=code)
    code.rename(data / "was")
    code.symlink_to(next((tmp_path / "elsewhere").iterdir()))
    woken = threading.Event()
    world.rec.launches.wake = woken.set
    world.tick()  # its code is copied aside, on a thread
    assert woken.wait(10)
    world.tick()
    assert world.fake.launches(job) == []
    assert world.phase(job)[0] == "Failed"
    assert any("outside the storage this project may use" in e for e in world.events(job))
