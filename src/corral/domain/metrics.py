"""Training metrics a job reports, and the two ways it can report them without corral.

A job reports metrics with `corral.job.log_metrics` or, needing nothing from corral, by
printing lines of this form to stdout (or stderr)::

    corral:metrics step=10 loss=0.31 accuracy=0.92
    corral:metrics {"step": 10, "loss": 0.31, "accuracy": 0.92}

or by appending JSON lines of the second form (optionally `{"step": .., "metrics": {..}}`)
to the file named by the `CORRAL_METRICS_FILE` environment variable. `step` is optional;
every other key is a metric and its value a number. Lines that do not parse are skipped:
a job's output is the job's, and a stray line must never fail it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from typing import Any

PREFIX = "corral:metrics"
PREFIX_BYTES = PREFIX.encode()
FILE_ENV = "CORRAL_METRICS_FILE"
NAME_RE = re.compile(r"^[A-Za-z0-9_.:/-]{1,128}\Z")
#: keys of a report that are not metrics
RESERVED = frozenset({"step", "time", "metrics"})
#: reports of one job kept at most; beyond that new points are dropped (and said so once)
MAX_POINTS_PER_JOB = 200_000


@dataclasses.dataclass(frozen=True)
class Point:
    name: str
    value: float
    step: int | None
    time_ms: int | None = None


def parse_line(line: str) -> list[Point]:
    """The points of one stdout line, or [] when it is not a metrics line."""
    text = line.strip()
    if not text.startswith(PREFIX):
        return []
    rest = text[len(PREFIX):].strip()
    if rest.startswith("{"):
        return parse_json(rest)
    fields: dict[str, Any] = {}
    for item in rest.split():
        key, sep, value = item.partition("=")
        if sep:
            fields[key] = value
    return points(fields)


def parse_json(text: str) -> list[Point]:
    try:
        data = json.loads(text)
    except ValueError:
        return []
    return points(data) if isinstance(data, dict) else []


def points(data: dict[str, Any]) -> list[Point]:
    step = _int(data.get("step"))
    when = _number(data.get("time"))
    time_ms = round(when * 1000) if when is not None and when > 0 else None
    nested = data.get("metrics")
    values: dict[str, Any] = nested if isinstance(nested, dict) else {
        k: v for k, v in data.items() if k not in RESERVED}
    out = []
    for name, raw in values.items():
        value = _number(raw)
        if value is not None and isinstance(name, str) and NAME_RE.match(name):
            out.append(Point(name, value, step, time_ms))
    return out


def _number(v: Any) -> float | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, str):
        try:
            v = float(v)
        except ValueError:
            return None
    if isinstance(v, int | float) and math.isfinite(v):
        return float(v)
    return None


def _int(v: Any) -> int | None:
    n = _number(v)
    return int(n) if n is not None and n.is_integer() and abs(n) < 2**62 else None

