"""Background loops at scale: a loop whose passes cost CPU waits longer between them, so
that periodic work stays a small share of a core however much runs; a wake-up still runs
the scheduler's pass at once."""

from __future__ import annotations

import threading
import time

import pytest

from corral.domain import pacing
from corral.scheduler import reconciler
from corral.services import sync


def test_the_interval_is_stretched_to_keep_a_pass_s_share_of_a_core() -> None:
    assert pacing.wait_after(1.0, 0.002) == 1.0  # a cheap pass: the interval
    assert pacing.wait_after(1.0, 0.05) == pytest.approx(0.05 / pacing.SHARE)
    assert pacing.wait_after(1.0, 60.0) == 1.0 * pacing.MAX_STRETCH  # bounded


def burn(seconds: float) -> None:
    """Use `seconds` of this thread's CPU."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


class Counting:
    def __init__(self, cost: float) -> None:
        self.cost = cost
        self.passes: list[float] = []

    def tick(self) -> bool:
        self.passes.append(time.monotonic())
        burn(self.cost)
        return False

    def close(self) -> None:
        pass


def test_a_costly_storage_pass_waits_longer() -> None:
    """Passes of 30 ms of CPU, every 0.05 s asked: without pacing about 12 in a second;
    with it the wait is stretched to its bound (0.5 s), so at most 3."""
    syncer, stop = Counting(0.03), threading.Event()
    t = threading.Thread(target=sync.run_forever, args=(syncer, stop, 0.05))
    t.start()
    time.sleep(1.0)
    stop.set()
    t.join()
    assert 1 <= len(syncer.passes) <= 3


def test_a_wake_runs_a_stretched_scheduler_pass_at_once() -> None:
    """Passes of 30 ms of CPU every 0.2 s asked: the timed pass after the first comes
    2 s later (the bound), but a wake-up runs one at once."""
    rec, wake, stop = Counting(0.03), threading.Event(), threading.Event()
    t = threading.Thread(target=reconciler.run_forever, args=(rec, wake, stop, 0.2))
    t.start()
    deadline = time.monotonic() + 20
    while len(rec.passes) < 2 and time.monotonic() < deadline:  # the first, then a timed one
        time.sleep(0.01)
    time.sleep(0.1)
    woken = time.monotonic()
    wake.set()
    while len(rec.passes) < 3 and time.monotonic() < deadline:
        time.sleep(0.005)
    stop.set()
    wake.set()
    t.join()
    assert len(rec.passes) >= 3
    assert rec.passes[1] - rec.passes[0] > 1.0  # stretched (0.2 s without pacing)
    assert rec.passes[2] - woken < 1.0  # woken, not 2 s after the pass before
