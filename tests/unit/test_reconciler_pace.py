"""The scheduler thread's pace: while jobs are handed out ahead, a pass that no user waits
for may wait a moment for more to happen; one a user asked for never waits."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

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
