"""Time named functions of a corral server, and its threads' CPU, while a benchmark runs.

Put this folder first on the server's PYTHONPATH (the benchmarks pass their environment
on to the server they start) and name what to time:

    CORRAL_STEPTIMES=/tmp/steps.json \
    CORRAL_STEPTIMES_FUNCS=corral.scheduler.reconciler:Reconciler.tick,\
corral.store.queue_repo:queued \
    PYTHONPATH=benchmarks/steptimes python benchmarks/bench_local.py --jobs 500

Every 0.3 s the server rewrites the JSON file: for each function, its calls, CPU seconds
(the calling thread's clock) and wall seconds; for each thread, its CPU seconds so far.
Copy the file at two moments and subtract to get what happened in between. Only the
server's process is touched (a process whose command line runs `server.serve`); a name
that is imported with `from ... import` elsewhere is timed only where it is called through
its module or class. Timing costs each call a few microseconds.
"""

from __future__ import annotations

import os
import sys

_ON = bool(os.environ.get("CORRAL_STEPTIMES")) and "server.serve" in " ".join(
    getattr(sys, "orig_argv", []))

if _ON:
    import functools
    import importlib
    import json
    import threading
    import time
    from typing import Any

    _totals: dict[str, list[float]] = {}
    _lock = threading.Lock()

    def _timed(name: str, fn: Any) -> Any:
        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            cpu, wall = time.thread_time(), time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
                with _lock:
                    t = _totals.setdefault(name, [0, 0.0, 0.0])
                    t[0], t[1], t[2] = t[0] + 1, t[1] + cpu, t[2] + wall
        return call

    def _wrap(spec: str) -> None:
        module, _, qualname = spec.partition(":")
        owner: Any = importlib.import_module(module)
        *path, attr = qualname.split(".")
        for part in path:
            owner = getattr(owner, part)
        setattr(owner, attr, _timed(qualname, getattr(owner, attr)))

    def _threads() -> dict[str, float]:
        tick = os.sysconf("SC_CLK_TCK")
        out = {}
        for t in threading.enumerate():
            try:
                with open(f"/proc/self/task/{t.native_id}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            out[f"{t.name} #{t.native_id}"] = (int(fields[11]) + int(fields[12])) / tick
        return out

    def _write() -> None:
        path = os.environ["CORRAL_STEPTIMES"]
        while True:
            time.sleep(0.3)
            with _lock:
                funcs = {k: {"calls": v[0], "cpu_s": v[1], "wall_s": v[2]}
                         for k, v in _totals.items()}
            with open(path + ".tmp", "w") as fh:
                json.dump({"functions": funcs, "threads": _threads(), "time": time.time()}, fh)
            os.replace(path + ".tmp", path)

    for _spec in filter(None, os.environ.get("CORRAL_STEPTIMES_FUNCS", "").split(",")):
        _wrap(_spec)
    threading.Thread(target=_write, name="steptimes", daemon=True).start()
