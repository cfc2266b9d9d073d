"""A log stream's share of the server: a window at a time, the event loop's other work
between two windows, and no more than its rate on average (a log that floods while many
follow it must not stall the API or starve the other followers)."""

from __future__ import annotations

import asyncio
import itertools
import json
import pathlib
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from corral.api import logs, streams, watch
from corral.domain import pacing


class _Ctx:
    """What a log stream uses of the API's context."""

    def __init__(self) -> None:
        self.changes = watch.JobChanges()
        self.log_rate = pacing.Rate(1 << 40)

    async def blocking(self, fn: Callable[..., Any], *args: Any) -> Any:
        return fn(*args)


class _Request:
    async def is_disconnected(self) -> bool:
        return False


def _ended_log(path: pathlib.Path, size: int) -> logs.Located:
    line = b"x" * 99 + b"\n"
    path.write_bytes(line * (size // len(line)))
    return logs.Located(path=path, attempt=1, latest=1, finished=True, phase="Completed",
                        job_name="flood")


async def _follow(stream: Any, each: Callable[[bytes], Awaitable[None]]) -> None:
    async for chunk in stream:
        await each(chunk)


def test_a_stream_lets_the_event_loop_turn_between_two_windows(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(streams, "LOG_BYTES_PER_S", 1 << 40)  # the turns, not the rates
    # No recheck of the job's state while it is read (this context has no database): on
    # a busy machine the windows took longer than STATE_RECHECK_S to send.
    monkeypatch.setattr(streams, "STATE_RECHECK_S", 1e9)
    located = _ended_log(tmp_path / "worker-0.log", 20 * streams.LOG_EVENT_BYTES)
    turns = 0
    seen: list[tuple[int, bytes]] = []

    async def main() -> None:
        nonlocal turns
        done = asyncio.Event()

        async def other_work() -> None:  # another request, another stream
            nonlocal turns
            while not done.is_set():
                turns += 1
                await asyncio.sleep(0)

        async def take(chunk: bytes) -> None:  # a client that reads at once: no wait
            seen.append((turns, chunk))

        other = asyncio.ensure_future(other_work())
        await asyncio.sleep(0)
        await _follow(streams._log_events(_Ctx(), _Request(), "p", "j", "worker-0",  # type: ignore[arg-type]
                                          None, located, 0, None, 60.0), take)
        done.set()
        await other

    asyncio.run(main())
    windows = [(t, json.loads(c.split(b"data: ", 1)[1])) for t, c in seen
               if c.startswith(b"event: log")]
    assert sum(len(w["content"]) for _, w in windows) == located.path.stat().st_size
    assert all(len(w["content"]) <= streams.LOG_EVENT_BYTES for _, w in windows)
    assert len(windows) >= 20
    assert all(b[0] > a[0] for a, b in itertools.pairwise(windows))
    assert seen[-1][1].startswith(b"event: end")


def test_a_rate_is_kept_on_average_with_a_second_s_worth_at_once() -> None:
    rate = pacing.Rate(1_000_000)
    now, waited = 100.0, 0.0
    burst = [rate.wait_after(100_000, now) for _ in range(10)]  # a second's worth at once
    assert burst == [0.0] * 10
    for _ in range(50):  # 50 windows of 100 kB more, back to back: 5 s worth at its rate
        wait = rate.wait_after(100_000, now)
        waited += wait
        now += wait
    assert now - 100.0 >= 5.0 - 0.1  # sent within 0.1 s of what its rate allows, no sooner
    assert rate.wait_after(1_000, now + 10.0) == 0.0  # after a quiet while: at once again
    later = [rate.wait_after(100_000, now + 10.0) for _ in range(20)]
    assert later[:9] == [0.0] * 9 and later[-1] > 0.9


def test_streams_that_share_a_rate_take_turns() -> None:
    shared = pacing.Rate(1_000_000)
    now = 0.0
    for _ in range(10):
        shared.wait_after(100_000, now)  # its second's worth spent
    # Three streams each send a window in turn: each waits for what all three sent.
    waits = [shared.wait_after(100_000, now) for _ in range(3)]
    assert waits == pytest.approx([0.1, 0.2, 0.3])
