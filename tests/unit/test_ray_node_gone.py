"""A Ray task whose node is seen gone: lost with its node, unless its exit code came first
(`fakeray`: the agents run in this process)."""

from __future__ import annotations

import dataclasses
import pathlib
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest
import ray

from corral.executors import base
from corral.executors.ray import cluster, nodes
from tests import factories
from tests.unit import fakeray, test_ray_executor

NODE_A = "a" * 56


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> Iterator[fakeray.Cluster]:
    node = tmp_path / "node"
    node.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(node))
    monkeypatch.setattr(nodes, "NODES_TTL", 0.0)  # every look at the nodes asks Ray
    yield from fakeray.running(monkeypatch)


def test_a_task_whose_exit_code_came_just_before_its_node_was_seen_gone_exited(
        tmp_path: pathlib.Path, fake: fakeray.Cluster, monkeypatch: pytest.MonkeyPatch,
) -> None:
    gate = tmp_path / "gate"
    spec = test_ray_executor.spec_for(
        tmp_path / "home", "l1", argv=("/bin/sh", "-c", f"while [ ! -e {gate} ]; do "
                                       "sleep 0.05; done; exit 3"))
    ex = cluster.RayExecutor("127.0.0.1:1")
    try:
        handle = ex.launch(spec)
        assert ex.poll(handle).state is base.State.RUNNING
        [wait] = fake.answers("wait")
        listed = fake.nodes

        def ends_then_node_goes() -> list[dict[str, Any]]:
            # The task ends and its agent answers; then Ray no longer lists its node.
            gate.touch()
            factories.wait_for(wait.fut.done, what="the agent's answer")
            return [n for n in listed() if n["NodeID"] != NODE_A]

        monkeypatch.setattr(ray, "nodes", ends_then_node_goes)

        status = test_ray_executor.ended(ex, handle)

        assert (status.state, status.exit_code) == (base.State.EXITED, 3)
    finally:
        ex.close()


def test_a_task_whose_last_files_cannot_be_copied_back_is_lost_with_its_node(
        tmp_path: pathlib.Path, fake: fakeray.Cluster, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its exit code came, then its node left before its last files were copied back: the
    job must not end well without them (it runs again), and its log says why."""
    gate = tmp_path / "gate"
    out = tmp_path / "out"
    spec = dataclasses.replace(test_ray_executor.spec_for(
        tmp_path / "home", "l2", argv=("/bin/sh", "-c", f"while [ ! -e {gate} ]; do "
                                       "sleep 0.05; done; exit 0")), output_dirs=(str(out),))
    ex = cluster.RayExecutor("127.0.0.1:1")
    try:
        handle = ex.launch(spec)
        assert ex.poll(handle).state is base.State.RUNNING
        [agent] = fake.actors.values()
        [wait] = fake.answers("wait")

        def node_gone(*_args: Any) -> Any:
            raise RuntimeError("the actor died unexpectedly: its node left")

        # Its node is leaving: its agent can no longer be asked for the task's files, and
        # answers the wait (exit code 0) before Ray stops listing the node.
        monkeypatch.setattr(agent.obj, "listing", node_gone)
        gate.touch()
        factories.wait_for(wait.fut.done, what="the agent's answer")
        listed = fake.nodes
        monkeypatch.setattr(ray, "nodes", lambda: [
            n for n in listed() if n["NodeID"] != NODE_A])

        status = test_ray_executor.ended(ex, handle)

        assert status.state is base.State.NODE_LOST
        assert "last files" in status.message
        log = pathlib.Path(spec.log_path).read_text()
        assert "its last files could not be copied back: its node left" in log
    finally:
        ex.close()
