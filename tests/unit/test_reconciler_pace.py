"""The scheduler thread's pace: while jobs are handed out ahead, a pass that no user waits
for may wait a moment for more to happen; one a user asked for never waits."""

from __future__ import annotations

import threading
import time
import types
from collections.abc import Iterator

import pytest

from corral.domain import resources, scheduling
from corral.scheduler import reconciler
from tests import factories
from tests.unit.test_reconciler import World, world  # noqa: F401 - the fixture


class Pacer:
    """A reconciler as run_forever sees it: how long it may hold, and its passes."""

    def __init__(self, hold: float) -> None:
        self.hold = hold
        self.passes: list[float] = []

    def hold_s(self) -> float:
        return self.hold

    def tick(self) -> bool:
        self.passes.append(time.monotonic())
        return False


@pytest.fixture
def thread() -> Iterator[tuple[Pacer, threading.Event, threading.Event]]:
    pacer = Pacer(hold=0.0)
    wake, stop, urgent = threading.Event(), threading.Event(), threading.Event()
    t = threading.Thread(target=reconciler.run_forever, args=(pacer, wake, stop, 60.0, urgent),
                         daemon=True)
    t.start()
    yield pacer, wake, urgent
    stop.set()
    urgent.set()
    wake.set()
    t.join(timeout=10)
    assert not t.is_alive()


def test_a_pass_comes_at_once_when_nothing_is_handed_out(
        thread: tuple[Pacer, threading.Event, threading.Event]) -> None:
    pacer, wake, _urgent = thread
    wake.set()
    factories.wait_for(lambda: pacer.passes, timeout=5, what="a pass")


def test_a_held_pass_waits_for_its_moment_but_not_for_a_user(
        thread: tuple[Pacer, threading.Event, threading.Event]) -> None:
    pacer, wake, urgent = thread
    pacer.hold = 3600.0  # (far longer than any test: only an urgent wake ends it)
    wake.set()  # a task ended, say
    time.sleep(0.3)
    assert pacer.passes == []
    urgent.set()  # a user stopped a job
    wake.set()
    factories.wait_for(lambda: pacer.passes, timeout=5, what="the urgent pass")
    assert len(pacer.passes) == 1


def test_hold_only_while_jobs_are_handed_out_and_only_shortly_after_a_pass(
        world: World) -> None:  # noqa: F811 - the fixture
    rec = world.rec
    rec.tick()
    assert rec.hold_s() == 0.0  # nothing handed out
    rec._follow["job"] = object()  # type: ignore[assignment]
    rec._pass_began = time.monotonic()
    assert 0.0 < rec.hold_s() <= reconciler.FOLLOW_PACE_S
    rec._pass_began = time.monotonic() - 2 * reconciler.FOLLOW_PACE_S
    assert rec.hold_s() == 0.0
    rec._follow.clear()


def test_chains_keep_what_was_handed_out_unless_it_would_come_too_late(
        world: World) -> None:  # noqa: F811 - the fixture
    """Who follows whom: jobs handed out earlier keep their places while those are at
    most one layer later than their own; others go at the end of the shortest chain."""
    rec = world.rec
    one = resources.Resources(cpu=1, memory_mb=1024)
    heads = {"A": ("local", one), "B": ("local", one)}
    by_id = {j: scheduling.Queued(j, "p", "default", one) for j in "hxyzwvu"}

    def handed(**after: str) -> None:
        rec._follow = {j: types.SimpleNamespace(after_job=b)  # type: ignore[misc]
                       for j, b in after.items()}

    # x and y were handed out behind A (chain A two deep), z behind B: tasks ended at
    # different times. The order puts x and y in layer 1: y keeps its place, one late.
    handed(x="A", y="x", z="B")
    plan = rec._chains([("x", 1), ("y", 1), ("z", 2), ("w", 2), ("v", 3), ("u", 3)],
                       heads, by_id)
    assert plan == [("x", "A"), ("y", "x"), ("z", "B"), ("w", "z"), ("v", "y"), ("u", "w")]
    # A job of higher priority comes first in the order: it goes one deep, and the others
    # move where their places would now be too late.
    order = [("h", 1), ("x", 1), ("y", 2), ("z", 2), ("w", 3), ("v", 3)]
    plan = rec._chains(order, heads, by_id)
    assert [job for job, _spot in plan] == [job for job, _layer in order]
    depth = {"A": 0, "B": 0}
    for job, spot in plan:
        depth[job] = depth[spot] + 1
    assert depth["h"] == 1
    for job, layer in order:
        assert depth[job] <= min(reconciler.FOLLOW_DEPTH, layer + 1)
    assert sorted(spot for _job, spot in plan).count("A") == 1  # (one follower a place)
    rec._follow = {}
