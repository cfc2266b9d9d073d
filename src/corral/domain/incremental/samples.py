"""How a loop shares a growing dataset between training and evaluation.

A dataset's samples are its index file's lines, numbered from 0 in the order they were
appended. At each check the samples that appeared since the last one are one batch: its
first `trainProb` share waits for the next round's training, and the rest becomes one
evaluation version. The evaluation set is the last `EVAL_VERSIONS` versions; a round
freezes it when it starts, and both models are judged on that same set. Samples are kept
as ranges of line numbers, `(start, end)` with `end` excluded.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Iterable, Sequence

#: how many evaluation versions make the evaluation set (Sedna's EvalSamplesCapacity)
EVAL_VERSIONS = 5

Range = tuple[int, int]


@dataclasses.dataclass(frozen=True)
class Pool:
    """What a loop holds of its dataset: how far it has split it, the training samples
    that wait for a round, and the evaluation versions (oldest first)."""

    split_upto: int = 0
    train: tuple[Range, ...] = ()
    evals: tuple[Range, ...] = ()

    @property
    def num_of_samples(self) -> int:
        """New training samples since the last round (the train trigger's metric)."""
        return count(self.train)

    def to_json(self) -> tuple[str, str]:
        return json.dumps([list(r) for r in self.train]), json.dumps([list(r) for r in self.evals])

    @classmethod
    def of(cls, split_upto: int, train: str, evals: str) -> Pool:
        return cls(split_upto=split_upto, train=_ranges(train), evals=_ranges(evals))


def _ranges(text: str) -> tuple[Range, ...]:
    return tuple((int(a), int(b)) for a, b in json.loads(text or "[]"))


def train_share(n: int, train_prob: float) -> int:
    """How many of `n` new samples go to training (rounded down, as Sedna does; the
    epsilon keeps 0.29 x 100 from being read as 28.999...)."""
    return min(n, math.floor(train_prob * n + 1e-9))


def split(pool: Pool, total: int, train_prob: float) -> Pool:
    """The pool once the samples up to `total` are split (unchanged when none are new)."""
    if total <= pool.split_upto:
        return pool
    start = pool.split_upto
    cut = start + train_share(total - start, train_prob)
    train = _merge(pool.train, (start, cut))
    evals = (*pool.evals, (cut, total)) if total > cut else pool.evals
    return Pool(split_upto=total, train=train, evals=evals[-EVAL_VERSIONS:])


def shrunk(total: int) -> Pool:
    """A pool for a dataset found shorter than what was split: the line numbers kept no
    longer name the same samples, so the loop starts again from `total`."""
    return Pool(split_upto=total)


def take_train(pool: Pool) -> tuple[Pool, tuple[Range, ...]]:
    """The training samples a round takes, and the pool without them."""
    return dataclasses.replace(pool, train=()), pool.train


def give_back(pool: Pool, ranges: Iterable[Range]) -> Pool:
    """The pool with a failed round's training samples waiting again (before newer ones)."""
    merged: tuple[Range, ...] = ()
    for r in [*ranges, *pool.train]:
        merged = _merge(merged, r)
    return dataclasses.replace(pool, train=merged)


def _merge(ranges: tuple[Range, ...], new: Range) -> tuple[Range, ...]:
    if new[1] <= new[0]:
        return ranges
    if ranges and ranges[-1][1] == new[0]:
        return (*ranges[:-1], (ranges[-1][0], new[1]))
    return (*ranges, new)


def count(ranges: Iterable[Range]) -> int:
    return sum(b - a for a, b in ranges)


def pick(lines: Sequence[str], ranges: Iterable[Range]) -> list[str]:
    """The samples the ranges name (line numbers past the end name nothing)."""
    out: list[str] = []
    for a, b in ranges:
        out.extend(lines[a:b])
    return out


def content_hash(text: bytes) -> str:
    """The content hash a round records of its frozen evaluation set."""
    return "sha256:" + hashlib.sha256(text).hexdigest()
