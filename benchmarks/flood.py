"""bench_scale.py's `flood` section: one job floods its log while many clients follow it.

A job writes its log as fast as it can (the figure is `flood_mb` MB in all; its log keeps
its cap, task_log_max_mb, so the followers have that cap's first half to read through and
more keeps coming); `flood_followers` clients follow it from its start through the log
stream, each reading as fast as it can, and a client asks `/healthz` once a second. What a
user would notice: whether every follower gets lines (and how evenly they share what the
server sends) and whether the API still answers meanwhile.
"""

from __future__ import annotations

import contextlib
import json
import statistics
import subprocess
import sys
import threading
import time
from http import client as http_client
from typing import Any

import bench_local

#: what the flooding job runs: `mb` MB of 100-byte lines, a MB at a time
FLOODER = """import sys
mb = int(sys.argv[1])
block = ("x" * 99 + "\\n").encode() * 10_000
out = sys.stdout.buffer
for _ in range(mb):
    out.write(block)
out.flush()
"""
#: how long a `/healthz` may take before it counts as timed out
HEALTH_TIMEOUT_S = 2.0


class Reader:
    """One client following the log from its start, reading bytes as they come (counted,
    not parsed: the client's own work is kept small beside the server's)."""

    def __init__(self, srv: bench_local.Server, job_id: str, token: str) -> None:
        self.bytes = 0
        self.first_s: float | None = None  #: seconds from the start until its first data
        self._conn = http_client.HTTPConnection(srv.http.host, srv.http.port, timeout=60)
        self._path = srv.path(f"/training-jobs/{job_id}/tasks/worker-0/logs/stream"
                              "?timeout=600")
        self._token = token

    def follow(self, start: float, until: float) -> None:
        with contextlib.suppress(OSError, ValueError, http_client.HTTPException):
            self._conn.request("GET", self._path, headers={"X-Auth-Token": self._token})
            resp = self._conn.getresponse()
            while time.time() < until:
                chunk = resp.read1(1 << 16)
                if not chunk:
                    return
                if b'"content"' in chunk and self.first_s is None:
                    self.first_s = time.time() - start
                self.bytes += len(chunk)

    def close(self) -> None:
        with contextlib.suppress(OSError, AttributeError):
            self._conn.sock.shutdown(2)
        self._conn.close()


#: the prober, a process of its own: a thread beside the 100 readers would count their
#: wait for this process's GIL as the server's
PROBER = """import json, sys, time
from http import client
host, port, until, timeout = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
out = []
while time.time() < until:
    t0 = time.perf_counter()
    conn = client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("GET", "/healthz")
        ok = conn.getresponse().status == 200
        out.append((time.perf_counter() - t0) * 1000 if ok else None)
    except OSError:
        out.append(None)
    finally:
        conn.close()
    time.sleep(max(0.0, 1.0 - (time.perf_counter() - t0)))
print(json.dumps(out))
"""


def health(srv: bench_local.Server, until: float) -> subprocess.Popen[str]:
    """`/healthz` once a second until `until`, from a process of its own; it prints each
    answer's time in ms, null for a timeout."""
    return subprocess.Popen(
        [sys.executable, "-c", PROBER, srv.http.host, str(srv.http.port), str(until),
         str(HEALTH_TIMEOUT_S)], stdout=subprocess.PIPE, text=True)


def section_flood(followers: int, mb: int, seconds: float, srv: bench_local.Server,
                  home: Any) -> dict[str, Any]:
    script = home.parent / "flooder.py"
    script.write_text(FLOODER)
    r = srv.http.post(srv.path("/training-jobs"), json=bench_local.job_body(
        f"{sys.executable} -u {script} {mb}", "flood"))
    r.raise_for_status()
    job_id = r.json()["metadata"]["id"]
    bench_local.wait_phase(srv, job_id, "Running")
    bench_local.log(f"flood: a job writing {mb} MB, {followers} clients following it from "
                    f"its start for {seconds:g} s, /healthz every second")
    token = srv.http.headers["X-Auth-Token"]
    readers = [Reader(srv, job_id, token) for _ in range(followers)]
    start = time.time()
    until = start + seconds
    prober = health(srv, until)
    threads = [threading.Thread(target=x.follow, args=(start, until)) for x in readers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    probes: list[float | None] = json.loads(prober.communicate()[0])
    for x in readers:
        x.close()
    got = sorted(x.bytes for x in readers)
    answered = [p for p in probes if p is not None]
    return {
        "followers": followers, "mb": mb, "seconds": seconds,
        "silent": sum(x.first_s is None for x in readers),
        "first_s": {"median": statistics.median([x.first_s for x in readers
                                                 if x.first_s is not None] or [0.0]),
                    "max": max((x.first_s for x in readers if x.first_s is not None),
                               default=0.0)},
        "mb_per_follower": {"min": got[0] / 1e6, "median": statistics.median(got) / 1e6,
                            "max": got[-1] / 1e6},
        "mb_per_s": sum(got) / 1e6 / seconds,
        "healthz": {"probes": len(probes), "timeouts": len(probes) - len(answered),
                    "median_ms": statistics.median(answered) if answered else 0.0,
                    "max_ms": max(answered, default=0.0), "ms": probes},
    }
