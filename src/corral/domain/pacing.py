"""How often a background loop runs: its interval, stretched at scale.

The server's periodic loops (the scheduler's pass, the storage pass, resource sampling)
each do work in proportion to what runs: with a thousand tasks a pass reads a thousand
jobs. Run every interval regardless, they kept 15-24% of a core busy on a server where
nothing changed. So a loop waits its interval, or longer where its last pass took more
than SHARE of the wait in CPU time: no loop spends more than about SHARE of a core on
periodic work, however much runs (MAX_STRETCH bounds how far an interval stretches).
What wakes a loop early (the scheduler's pass on every change) still does at once.

What the API sends without being asked each time (log streams) is paced too: `Rate`.
"""

from __future__ import annotations

#: the most of a core one loop's periodic passes take
SHARE = 0.01
#: an interval is stretched at most this many times
MAX_STRETCH = 10.0


def wait_after(interval: float, pass_cpu_s: float) -> float:
    """Seconds from the end of a pass that took `pass_cpu_s` of CPU to the next one."""
    return min(max(interval, pass_cpu_s / SHARE), interval * MAX_STRETCH)


class Rate:
    """An amount a second on average (`per_s`), spent as it goes: at most a second's worth
    at once after a quiet while, and after that only as fast as the rate refills. Shared
    by several senders, it is shared out in the order they send."""

    def __init__(self, per_s: float) -> None:
        self.per_s = per_s
        self._paid = float("-inf")  #: when what was spent so far is paid for, at `per_s`

    def wait_after(self, spent: float, now: float) -> float:
        """Seconds to wait, having spent `spent` more at `now` (a monotonic clock)."""
        self._paid = max(self._paid, now - 1.0) + spent / self.per_s
        return max(0.0, self._paid - now)
