"""What a training job can call from inside: `from corral import job`.

    from corral import job
    job.log_metrics({"loss": 0.31, "accuracy": 0.92}, step=10)

Metrics go to the file corral names in `CORRAL_METRICS_FILE` (one JSON line each); run
outside corral they are printed as `corral:metrics` lines instead, so a script behaves the
same anywhere. This module imports nothing heavy: it runs inside every job that uses it.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Mapping

_FILE_ENV = "CORRAL_METRICS_FILE"
_PREFIX = "corral:metrics"


def log_metrics(metrics: Mapping[str, float], step: int | None = None) -> None:
    """Record `metrics` (name -> number) at `step`; the last values are the job's final."""
    values = {}
    for name, value in metrics.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            try:
                value = float(value)  # numpy scalars and the like
            except (TypeError, ValueError):
                raise TypeError(f"metric {name!r}: {value!r} is not a number") from None
        if not math.isfinite(value):
            continue
        values[str(name)] = float(value)
    record: dict[str, object] = {"time": time.time(), "metrics": values}
    if step is not None:
        record["step"] = int(step)
    line = json.dumps(record)
    path = os.environ.get(_FILE_ENV)
    if path:
        # One write of a whole line in append mode: readers never see half a record.
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")
    else:
        print(f"{_PREFIX} {line}", file=sys.stdout, flush=True)


def job_id() -> str | None:
    """The id of the corral job this runs in, or None outside corral."""
    return os.environ.get("CORRAL_JOB_ID")
