"""Long metric series made short enough to draw, on the server, before they are sent.

A chart is a few hundred to a few thousand pixels wide: a series of a million points
sends and draws a thousand times what anyone can see. Two ways, for the two kinds of
series corral keeps:

- `extremes` (a series a job reported: loss, accuracy): the points are cut into buckets
  and each bucket keeps its lowest and its highest point, in their order, so a spike or a
  dip stays visible; the first and last points are always kept.
- `means` (resource samples that share one time axis: CPU, memory, GPU): each bucket is
  one point, at its first sample's time, with each series' mean over the bucket, so the
  series keep their common axis.

A series no longer than asked for is returned as it is.
"""

from __future__ import annotations

from collections.abc import Sequence


def _buckets(n: int, count: int) -> list[tuple[int, int]]:
    """`count` consecutive, nearly equal index ranges covering range(n)."""
    return [(n * i // count, n * (i + 1) // count) for i in range(count)
            if n * i // count < n * (i + 1) // count]


def extremes(values: Sequence[float], points: int) -> list[int]:
    """The indices to keep of `values` so that at most `points` (at least 4) remain."""
    n = len(values)
    if n <= points:
        return list(range(n))
    keep = {0, n - 1}
    for lo, hi in _buckets(n - 2, max(1, (points - 2) // 2)):
        chunk = range(lo + 1, hi + 1)
        keep.add(min(chunk, key=values.__getitem__))
        keep.add(max(chunk, key=values.__getitem__))
    return sorted(keep)


def means(times: Sequence[int], series: Sequence[Sequence[float]],
          points: int) -> tuple[list[int], list[list[float]]]:
    """(times, series) with at most `points` points, each the mean of its bucket."""
    n = len(times)
    if n <= points:
        return list(times), [list(s) for s in series]
    spans = _buckets(n, points)
    return ([times[lo] for lo, _ in spans],
            [[round(sum(s[lo:hi]) / (hi - lo), 2) for lo, hi in spans] for s in series])
