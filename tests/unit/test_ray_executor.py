"""The Ray executor and its node agents in this process (`fakeray`: no Ray started): how a
launch is settled after a restart."""

from __future__ import annotations

import os
import pathlib
import tempfile
from collections.abc import Iterator

import pytest

from corral.domain import resources
from corral.executors import base, raycluster
from tests import factories
from tests.unit import fakeray
from tests.unit.fakeray import Cluster

NODE_A = raycluster.node_name("a" * 56)


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> Iterator[Cluster]:
    yield from fakeray.running(monkeypatch)


@pytest.fixture
def node_tmp(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    """Where the node's agents make their scratch folders (not the server's paths)."""
    node = tmp_path / "node"
    node.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(node))
    return node


@pytest.fixture
def executor(cluster: Cluster, node_tmp: pathlib.Path
             ) -> Iterator[raycluster.RayExecutor]:
    ex = raycluster.RayExecutor("127.0.0.1:1")
    yield ex
    ex.close()


def spec_for(home: pathlib.Path, launch_id: str, *, task: str = "worker-0",
             argv: tuple[str, ...] = ("true",), gang: tuple[str, ...] = (),
             job: str = "job1") -> base.LaunchSpec:
    attempt = home / "runs" / job / "attempt-1"
    return base.LaunchSpec(
        job_id=job, task=task, attempt=1, launch_id=launch_id, argv=argv, cwd=str(attempt),
        env={"PATH": os.environ.get("PATH", os.defpath)},
        log_path=str(attempt / "logs" / f"{task}.log"), control_dir=str(attempt / "ctl"),
        node=NODE_A, demand=resources.Resources(cpu=1, memory_mb=256), gang=gang,
        strategy="pack")


def bare(spec: base.LaunchSpec) -> base.LaunchSpec:
    """The launch as a restarted reconciler knows it (`Reconciler._bare_spec`)."""
    return base.LaunchSpec(job_id=spec.job_id, task=spec.task, attempt=spec.attempt,
                           launch_id=spec.launch_id, argv=(), cwd="", env={},
                           log_path=spec.log_path, control_dir=spec.control_dir,
                           node=spec.node)


def ended(ex: raycluster.RayExecutor, handle: base.Handle, timeout: float = 20) -> base.Status:
    def done() -> base.Status | None:
        status = ex.poll(handle)
        return status if status.state is not base.State.RUNNING else None

    found: base.Status = factories.wait_for(done, timeout=timeout, what="the task to end")
    return found


def log_of(spec: base.LaunchSpec) -> str:
    return pathlib.Path(spec.log_path).read_text()


# --- recover: a launch whose handle was never recorded ---------------------------------


def test_a_gangs_recovered_task_keeps_the_gangs_group_and_gives_it_back_at_the_end(
        tmp_path: pathlib.Path, cluster: Cluster, node_tmp: pathlib.Path,
) -> None:
    home = tmp_path / "home"
    gate = tmp_path / "gate"
    wait_gate = ("/bin/sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.05; done")
    specs = [spec_for(home, f"l{rank}", task=f"worker-{rank}", argv=wait_gate,
                      gang=(NODE_A, NODE_A)) for rank in (0, 1)]
    first = raycluster.RayExecutor("127.0.0.1:1")
    for spec in specs:
        first.launch(spec)  # ... and the server went before it recorded the handles
    first.close()
    assert list(cluster.groups) == ["corral-gang-job1-1"]

    second = raycluster.RayExecutor("127.0.0.1:1")
    try:
        statuses = [second.recover(bare(spec)) for spec in specs]
        assert [s.state for s in statuses] == [base.State.RUNNING] * 2
        assert {s.handle.group for s in statuses if s.handle} == {"corral-gang-job1-1"}
        gate.touch()
        for s in statuses:
            assert s.handle is not None
            assert ended(second, s.handle).exit_code == 0
            second.release(s.handle)
        # The gang's reservation is given back once its last task is released.
        assert cluster.groups == {} and "corral-gang-job1-1" in cluster.removed
    finally:
        second.close()


def test_a_launch_that_never_started_gives_back_the_group_made_for_it(
        tmp_path: pathlib.Path, executor: raycluster.RayExecutor,
        cluster: Cluster) -> None:
    spec = spec_for(tmp_path / "home", "l9")
    # The server reserved the task's resources, then went before it asked for the start.
    executor._placement_group(raycluster.task_group_name("l9"), spec)
    assert executor.recover(bare(spec)).state is base.State.NOT_STARTED
    assert cluster.groups == {}
