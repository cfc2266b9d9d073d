"""Links a job plants where the Ray executor's server side reads or writes (`fakeray`: the
executor and its node agents in this process, no Ray started).

The server ships an attempt's code and inputs to the nodes, and pulls a task's log, its
metrics and its outputs back into the attempt's folder and the output channels: folders a
job's user can change. What a task (or another of the same user) put there must neither be
read through nor written through."""

from __future__ import annotations

import dataclasses
import os
import pathlib
import sys
import tempfile
from collections.abc import Iterator

import pytest

from corral.domain import metrics
from corral.executors import base
from corral.executors.ray import cluster
from tests.unit import fakeray
from tests.unit.fakeray import Cluster
from tests.unit.test_ray_executor import ended, listed, log_of, make_inputs, reader, spec_for

SECRET = "ROOT-ONLY-SECRET"


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[Cluster]:
    yield from fakeray.running(monkeypatch)


@pytest.fixture
def executor(fake: Cluster, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch,
             ) -> Iterator[cluster.RayExecutor]:
    node = tmp_path / "node"  # where the node's agents make their scratch folders
    node.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(node))
    ex = cluster.RayExecutor("127.0.0.1:1")
    yield ex
    ex.close()


@pytest.fixture
def victim(tmp_path: pathlib.Path) -> pathlib.Path:
    """A folder of someone else's, with a file in it."""
    folder = tmp_path / "victim"
    folder.mkdir()
    (folder / "secret.txt").write_text(SECRET)
    return folder


def attempt_of(spec: base.LaunchSpec) -> pathlib.Path:
    return pathlib.Path(spec.control_dir).parent


def run(executor: cluster.RayExecutor, spec: base.LaunchSpec) -> base.Status:
    handle = executor.launch(spec)
    status = ended(executor, handle)
    executor.release(handle)
    return status


#: a task printing the file beside its code that has a second name, if it got one
SHOW = """import os
p = os.path.join(os.path.dirname(os.path.abspath(__file__)), "second-name.txt")
print(open(p).read() if os.path.exists(p) else "no second-name.txt")
"""


def test_a_file_with_a_second_name_in_the_code_is_not_shipped(
        tmp_path: pathlib.Path, executor: cluster.RayExecutor, victim: pathlib.Path) -> None:
    """The snapshot is the job's user's: a hard link there to a file it may not read would
    have the server read that file for it."""
    code = tmp_path / "home" / "runs" / "job1" / "attempt-1" / "code"
    code.mkdir(parents=True)
    (code / "train.py").write_text(SHOW)
    os.link(victim / "secret.txt", code / "second-name.txt")
    spec = dataclasses.replace(
        spec_for(tmp_path / "home", "c1", argv=(sys.executable, f"{code}/train.py")),
        code_dir=str(code), cwd=str(code))

    assert run(executor, spec).exit_code == 0

    assert SECRET not in log_of(spec)
    assert "no second-name.txt" in log_of(spec)


def test_an_input_with_a_second_name_is_not_shipped(
        tmp_path: pathlib.Path, executor: cluster.RayExecutor, victim: pathlib.Path) -> None:
    data, lone = make_inputs(tmp_path / "server")
    os.link(victim / "secret.txt", data / "second-name.txt")
    spec = spec_for(tmp_path / "home", "i1", argv=reader(data, lone),
                    input_dirs=(str(data), str(lone)))

    assert run(executor, spec).exit_code == 0

    assert "second-name.txt" not in listed(log_of(spec))["data_url"]
    assert "not copied to this node" in log_of(spec)


def test_a_log_folder_made_a_link_gets_no_output_written_through_it(
        tmp_path: pathlib.Path, executor: cluster.RayExecutor, victim: pathlib.Path) -> None:
    spec = spec_for(tmp_path / "home", "g1", argv=("echo", "the words of the task"))
    attempt_of(spec).mkdir(parents=True)
    (attempt_of(spec) / "logs").symlink_to(victim)

    assert run(executor, spec).exit_code == 0

    assert sorted(p.name for p in victim.iterdir()) == ["secret.txt"]


def test_a_metrics_file_made_a_link_gets_nothing_appended_through_it(
        tmp_path: pathlib.Path, executor: cluster.RayExecutor, victim: pathlib.Path) -> None:
    spec = spec_for(tmp_path / "home", "m1", argv=(
        "/bin/sh", "-c", f'echo \'{{"step": 1, "loss": 0.5}}\' >> "${metrics.FILE_ENV}"'))
    planted = attempt_of(spec) / "metrics" / "worker-0.jsonl"
    spec = dataclasses.replace(spec, env={**spec.env, metrics.FILE_ENV: str(planted)})
    planted.parent.mkdir(parents=True)
    planted.symlink_to(victim / "secret.txt")

    run(executor, spec)

    assert (victim / "secret.txt").read_text() == SECRET


def test_an_output_folder_with_a_link_inside_gets_nothing_copied_through_it(
        tmp_path: pathlib.Path, executor: cluster.RayExecutor, victim: pathlib.Path) -> None:
    out = tmp_path / "server" / "train"
    out.mkdir(parents=True)
    (out / "sub").symlink_to(victim)
    spec = dataclasses.replace(
        spec_for(tmp_path / "home", "o1", argv=(
            "/bin/sh", "-c", 'mkdir -p "${0#--train_url=}/sub" && '
                             'echo copied > "${0#--train_url=}/sub/x.txt"', f"--train_url={out}")),
        output_dirs=(str(out),))

    run(executor, spec)

    assert sorted(p.name for p in victim.iterdir()) == ["secret.txt"]
    assert "could not copy the task's files back" in log_of(spec)


# --- on the node: the agent reads what a task wrote, in a folder the task's user owns -----


def test_a_task_that_makes_its_log_on_the_node_a_link_gets_nothing_read_through_it(
        tmp_path: pathlib.Path, executor: cluster.RayExecutor, victim: pathlib.Path) -> None:
    """Its log on the node lies in its own folder there (its working directory)."""
    spec = spec_for(tmp_path / "home", "n1", argv=(
        "/bin/sh", "-c", f"rm task.log && ln -s {victim}/secret.txt task.log"))

    run(executor, spec)

    log = pathlib.Path(spec.log_path)
    assert not log.exists() or SECRET not in log.read_text()


def test_a_task_that_makes_its_output_folder_on_the_node_a_link_gets_nothing_copied_back(
        tmp_path: pathlib.Path, executor: cluster.RayExecutor, victim: pathlib.Path) -> None:
    out = tmp_path / "server" / "train"
    out.mkdir(parents=True)
    spec = dataclasses.replace(
        spec_for(tmp_path / "home", "n2", argv=(
            "/bin/sh", "-c", f'o="${{0#--train_url=}}"; rm -r "$o" && ln -s {victim} "$o"',
            f"--train_url={out}")),
        output_dirs=(str(out),))

    run(executor, spec)

    assert list(out.iterdir()) == []
