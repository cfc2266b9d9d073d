"""Conditions on metrics, daily windows, and the metrics an evaluation reported.

Sedna's operators (`gt >`, `ge >=`, `eq = ==`, `ne !=`, `le <=`, `lt <`) compare a metric
with a threshold; two numbers within 1e-6 are equal. The deploy trigger reads the
evaluation's metrics: `<m>` is the new model's, `<m>_delta` the new minus the current
model's, and a metric that is a list is read by index (`precision_delta[1]`). A metric the
evaluation did not report, a list read without an index, or an evaluation that did not
report both models is a `MetricError` that says which: never a silent 0.

An evaluation job reports one set of metrics per model it was given, in the order of
MODEL_URLS (0: the new model, 1: the current one), each metric under the model's index:
`0/accuracy`, `1/accuracy`. Element j of a list is reported as `<m>.<j>`:
`0/precision.1`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping

#: operator as written -> its symbol
OPERATORS: dict[str, str] = {
    "gt": ">", ">": ">", "ge": ">=", ">=": ">=", "eq": "==", "=": "==", "==": "==",
    "ne": "!=", "!=": "!=", "le": "<=", "<=": "<=", "lt": "<", "<": "<",
}
#: two values closer than this are equal
EPSILON = 1e-6
DELTA = "_delta"
METRIC_RE = re.compile(r"^(?P<name>[A-Za-z0-9_.:/-]{1,128}?)(?:\[(?P<index>\d{1,6})\])?\Z")
#: a reported evaluation metric: the model's index, the metric, an element's index
REPORTED_RE = re.compile(r"^(?P<model>\d{1,3})/(?P<name>[A-Za-z0-9_.:/-]+?)(?:\.(?P<index>\d+))?\Z")
MINUTES_PER_DAY = 24 * 60


class MetricError(ValueError):
    """The metrics cannot answer the condition (the message says why)."""


def compare(value: float, operator: str, threshold: float) -> bool:
    """`value operator threshold`, with equality within EPSILON."""
    symbol = OPERATORS[operator]
    equal = abs(value - threshold) <= EPSILON
    if symbol == "==":
        return equal
    if symbol == "!=":
        return not equal
    if symbol == ">":
        return value > threshold and not equal
    if symbol == ">=":
        return value > threshold or equal
    if symbol == "<":
        return value < threshold and not equal
    return value < threshold or equal  # <=


def in_window(start: int, end: int, minute: int) -> bool:
    """Whether `minute` (of the day) lies in the window from `start` (included) to `end`
    (excluded), which wraps midnight when start > end; start == end is the whole day."""
    if start == end:
        return True
    if start < end:
        return start <= minute < end
    return minute >= start or minute < end


@dataclasses.dataclass(frozen=True)
class MetricRef:
    """A metric as a condition names it: `precision_delta[1]`."""

    name: str  #: the reported metric (`precision`)
    delta: bool  #: the new model's value minus the current one's
    index: int | None  #: which element of a list

    def __str__(self) -> str:
        index = "" if self.index is None else f"[{self.index}]"
        return f"{self.name}{DELTA if self.delta else ''}{index}"


def parse_metric(text: str) -> MetricRef:
    found = METRIC_RE.match(text)
    if not found:
        raise ValueError(f"metric '{text}' is not a metric name, optionally with _delta "
                         "and an index (precision_delta[1])")
    name = found.group("name")
    delta = name.endswith(DELTA) and len(name) > len(DELTA)
    index = found.group("index")
    return MetricRef(name=name[:-len(DELTA)] if delta else name, delta=delta,
                     index=None if index is None else int(index))


#: one model's metrics: scalars by name, lists by name (element index -> value)
Metrics = dict[str, float | dict[int, float]]


def evaluation_results(final: Mapping[str, float]) -> list[Metrics]:
    """The evaluation's reported metrics, one set per model in MODEL_URLS order. Metrics
    not reported under a model's index are left out."""
    by_model: dict[int, Metrics] = {}
    for key, value in final.items():
        found = REPORTED_RE.match(key)
        if not found:
            continue
        metrics = by_model.setdefault(int(found.group("model")), {})
        name, index = found.group("name"), found.group("index")
        if index is None:
            metrics[name] = float(value)
        else:
            elements = metrics.get(name)
            if not isinstance(elements, dict):
                if elements is not None:  # reported both as a number and as a list
                    continue
                elements = metrics[name] = {}
            elements[int(index)] = float(value)
    return [by_model.get(i, {}) for i in range(max(by_model, default=-1) + 1)]


def require_both(results: list[Metrics]) -> None:
    """MetricError unless the evaluation reported metrics for both models."""
    if len(results) < 2 or not results[0] or not results[1]:
        found = sum(1 for r in results if r)
        raise MetricError(
            f"the evaluation reported metrics for {found} model(s); it must report both "
            "the new model's (0/<metric>) and the current model's (1/<metric>)")


def value_of(ref: MetricRef, results: list[Metrics]) -> float:
    """What a condition's metric reads from the evaluation's results."""
    require_both(results)
    new = _one(ref, results[0], "new")
    return new - _one(ref, results[1], "current") if ref.delta else new


def _one(ref: MetricRef, metrics: Metrics, which: str) -> float:
    value = metrics.get(ref.name)
    if value is None:
        known = ", ".join(sorted(metrics)) or "none"
        raise MetricError(f"the evaluation did not report '{ref.name}' for the {which} "
                          f"model (it reported: {known})")
    if isinstance(value, dict):
        if ref.index is None:
            raise MetricError(f"'{ref.name}' is a list of {len(value)} values: name one, "
                              f"as {ref.name}{DELTA if ref.delta else ''}[0]")
        if ref.index not in value:
            raise MetricError(f"'{ref.name}' of the {which} model has no element "
                              f"{ref.index} (it has {sorted(value)})")
        return value[ref.index]
    if ref.index is not None:
        raise MetricError(f"'{ref.name}' is a single number, not a list: drop [{ref.index}]")
    return value


@dataclasses.dataclass(frozen=True)
class Verdict:
    passed: bool
    rule: str  #: the condition, the value it read and the outcome, in words


def judge(metric: str, operator: str, threshold: float, value: float) -> Verdict:
    passed = compare(value, operator, threshold)
    rule = (f"{metric} {OPERATORS[operator]} {threshold:g}: {value:.6g} "
            f"{'holds' if passed else 'does not hold'}")
    return Verdict(passed=passed, rule=rule)


def flat(metrics: Metrics) -> dict[str, float]:
    """A model's metrics as `name` and `name[j]` -> value (what the round record shows)."""
    out: dict[str, float] = {}
    for name, value in sorted(metrics.items()):
        if isinstance(value, dict):
            out.update({f"{name}[{j}]": v for j, v in sorted(value.items())})
        else:
            out[name] = value
    return out
