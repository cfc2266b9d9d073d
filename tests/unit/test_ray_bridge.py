"""The Ray bridge's view of a cluster that goes away and comes back, with a stand-in for
its driver process (no Ray): what the scheduler is told meanwhile, and what is told to the
cluster once it answers again."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest

from corral.domain import resources
from corral.executors import base
from corral.executors.ray import bridge
from tests import factories

NODE = resources.Node("ray-aaaaaaaaaaaa", cpu=2, memory_mb=4096)


class FakeChild:
    """Answers like a driver process connected to a one-node cluster."""

    made: list[FakeChild] = []
    refuse = False
    serial = itertools.count()

    def __init__(self, opts: bridge.Options, wake: Any) -> None:
        if FakeChild.refuse:
            raise bridge.Unreachable("connection refused")
        self.alive = True
        self.probe = None
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.number = next(FakeChild.serial)
        FakeChild.made.append(self)

    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        if not self.alive:
            raise bridge._Down("gone")
        self.calls.append((method, args))
        if method == "nodes":
            return [NODE]
        if method == "poll":
            return base.Status(base.State.RUNNING, handle=args[0])
        return None

    def exit_code(self) -> int | None:
        return 1

    def kill(self) -> None:
        self.alive = False

    def close(self) -> None:
        self.alive = False


@pytest.fixture
def ex(monkeypatch: pytest.MonkeyPatch) -> Iterator[bridge.RayBridge]:
    FakeChild.made, FakeChild.refuse = [], False
    monkeypatch.setattr(bridge, "_Child", FakeChild)
    monkeypatch.setattr(bridge, "PROBE_EVERY", 0.01)
    monkeypatch.setattr(bridge, "RETRY_EVERY", 0.01)
    b = bridge.RayBridge(bridge.Options(address="auto", lost_after=0.3))
    yield b
    b.close()


def handle(launch_id: str = "l1") -> base.Handle:
    return base.Handle(node=NODE.name, task="worker-0", pid=0, start_time=0.0,
                       control_dir="/x", launch_id=launch_id, actor="corral-node-v2-a")


def test_a_lost_cluster_loses_its_nodes_then_its_tasks_and_is_told_later(
        ex: bridge.RayBridge) -> None:
    assert ex.nodes() == [NODE]
    assert ex.poll(handle()).state is base.State.RUNNING
    FakeChild.refuse = True
    FakeChild.made[0].alive = False  # the driver process ended (Ray ends it)

    factories.wait_for(lambda: ex.nodes() == [], timeout=5, what="the nodes to go")
    assert ex.poll(handle()).state is base.State.RUNNING  # not known yet
    adopted = ex.adopt(handle())  # (a server that begins leading: it asks again)
    assert adopted.state is base.State.RUNNING and adopted.unsure
    lost = factories.wait_for(
        lambda: (s := ex.poll(handle())).state is base.State.NODE_LOST and s,
        timeout=5, what="the task to count as lost")
    assert "the Ray cluster at auto has been unreachable" in lost.message
    ex.release(handle())  # the scheduler is done with it: the cluster hears it later
    spec = base.LaunchSpec(job_id="j", task="worker-0", attempt=1, launch_id="l2", argv=(),
                           cwd="/", env={}, log_path="/x", control_dir="/x", node=NODE.name)
    launched = ex.launch(spec)  # placed just before the nodes went: lost at once
    assert ex.poll(launched).state is base.State.NODE_LOST
    # A launch a restarted server finds unsettled: lost, and retired once it answers.
    assert ex.recover(spec).state is base.State.NODE_LOST

    FakeChild.refuse = False  # it answers again
    factories.wait_for(lambda: ex.nodes() == [NODE], timeout=5, what="the nodes back")
    again = FakeChild.made[-1]
    assert again is not FakeChild.made[0]

    def told() -> list[str]:
        return [m for m, _ in again.calls if m in ("release", "forget")]

    # The new driver is in use before the calls deferred meanwhile are replayed to it.
    factories.wait_for(lambda: len(told()) >= 2, timeout=5, what="the deferred calls")
    assert told() == ["release", "forget"]
    assert ex.poll(handle("l3")).state is base.State.RUNNING


@pytest.mark.parametrize(("address", "probe"), [
    ("ray://head:10001", ("head", 10001)), ("10.0.0.1:6379", ("10.0.0.1", 6379)),
    ("[::1]:6379", ("::1", 6379)), ("auto", None), ("ray://head", None),
])
def test_the_address_checked_before_connecting(address: str,
                                               probe: tuple[str, int] | None) -> None:
    assert bridge._host_port(address) == probe
