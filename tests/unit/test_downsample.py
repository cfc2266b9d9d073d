"""Long metric series cut down on the server: spikes stay, shared axes stay shared."""

from __future__ import annotations

import itertools

from corral.domain import downsample


def test_a_short_series_is_kept_whole() -> None:
    assert downsample.extremes([3.0, 1.0, 2.0], 10) == [0, 1, 2]
    assert downsample.means([1, 2], [[5.0, 6.0]], 10) == ([1, 2], [[5.0, 6.0]])


def test_extremes_keep_the_ends_and_every_spike_and_dip() -> None:
    values = [1.0] * 10_000
    values[1234] = 99.0  # one spike
    values[8765] = -5.0  # one dip
    keep = downsample.extremes(values, 100)
    assert len(keep) <= 100
    assert keep == sorted(keep)
    assert {0, 1234, 8765, 9999} <= set(keep)


def test_extremes_of_a_monotonic_series_follow_its_shape() -> None:
    values = [float(i) for i in range(1000)]
    keep = downsample.extremes(values, 50)
    picked = [values[i] for i in keep]
    assert picked == sorted(picked) and picked[0] == 0 and picked[-1] == 999
    assert max(b - a for a, b in itertools.pairwise(picked)) <= 1000 / 24 + 1


def test_means_give_every_series_the_same_times() -> None:
    times = list(range(0, 1000, 1))
    cpu = [float(t % 10) for t in times]
    mem = [100.0] * 1000
    got_times, (got_cpu, got_mem) = downsample.means(times, [cpu, mem], 100)
    assert len(got_times) == len(got_cpu) == len(got_mem) == 100
    assert got_times[0] == 0 and got_times == sorted(got_times)
    assert got_mem == [100.0] * 100
    assert got_cpu == [4.5] * 100  # each bucket of ten samples 0..9
