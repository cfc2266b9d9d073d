"""corral on a Ray cluster against Ray Jobs (`ray job submit`) on the same cluster, one run.

Starts a local Ray cluster (its own temp dir, token auth off, dashboard on for Ray Jobs),
a `corral server` process pointed at it (CORRAL_RAY_ADDRESS), and measures the same
trivial job both ways: one at a time (latency) and N submitted at once (throughput). It
prints both figures and the ratio; nothing here asserts (see README.md in this directory).

    python benchmarks/bench_ray.py [--seq 10] [--jobs 100] [--quick] [--json PATH]
    python benchmarks/bench_ray.py --inputs MB      # shipping an input of MB to the node

With `--inputs` it measures instead what an input channel of that size costs a job (the
files shipped to the node through Ray) against copying the same folder on this disk, and
the most memory the server's Ray driver process holds meanwhile.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pathlib
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import bench_local as bl

RAY_TERMINAL = {"SUCCEEDED", "FAILED", "STOPPED"}
CPUS = 2  #: the cluster's cores: two trivial jobs run at a time either way


@contextlib.contextmanager
def ray_cluster() -> Iterator[tuple[str, str]]:
    """A one-node Ray cluster of CPUS cores: (GCS address, dashboard URL for Ray Jobs)."""
    from ray import cluster_utils

    tmp = tempfile.mkdtemp(prefix="crb-", dir="/tmp")  # short: unix socket paths
    os.makedirs(os.path.join(tmp, "ray"))
    os.environ.update(RAY_TMPDIR=tmp, RAY_AUTH_MODE="disabled")
    port = bl.free_port()
    cluster = cluster_utils.Cluster(initialize_head=True, head_node_args={
        "num_cpus": CPUS, "memory": 4 * 2**30, "temp_dir": tmp, "include_dashboard": True,
        "dashboard_host": "127.0.0.1", "dashboard_port": port})
    try:
        yield str(cluster.address), f"http://127.0.0.1:{port}"
    finally:
        cluster.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)


def jobs_client(url: str) -> Any:
    from ray.job_submission import JobSubmissionClient

    deadline = time.monotonic() + 60
    while True:  # the dashboard's job API comes up a little after the cluster
        try:
            return JobSubmissionClient(url)
        except (ConnectionError, RuntimeError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def ray_job_run(jc: Any) -> float:
    t0 = time.perf_counter()
    sid = jc.submit_job(entrypoint=bl.trivial_command(), entrypoint_num_cpus=1)
    while str(jc.get_job_status(sid)) not in RAY_TERMINAL:
        time.sleep(0.01)
    return time.perf_counter() - t0


def ray_job_burst(jc: Any, n: int) -> float:
    t0 = time.perf_counter()
    ids = {jc.submit_job(entrypoint=bl.trivial_command(), entrypoint_num_cpus=1)
           for _ in range(n)}
    while True:
        done = {j.submission_id for j in jc.list_jobs() if str(j.status) in RAY_TERMINAL}
        if ids <= done:
            return time.perf_counter() - t0
        time.sleep(0.2)


def corral_burst(srv: bl.Server, n: int) -> tuple[float, int]:
    prefix = f"burst{uuid.uuid4().hex[:6]}"
    t0 = time.perf_counter()
    bl.submit_many(srv, n, prefix)
    bl._wait_all_ended(srv, n, prefix, timeout=max(300.0, n * 3.0))
    return time.perf_counter() - t0, bl.count_in(srv, ["Completed"], prefix)


def run_all(seq: int, n: int) -> dict[str, Any]:
    with ray_cluster() as (address, dashboard), \
            tempfile.TemporaryDirectory(prefix="corral-bench-") as tmp:
        os.environ["CORRAL_RAY_ADDRESS"] = address
        srv = bl.start_server(pathlib.Path(tmp) / "home")
        try:
            jc = jobs_client(dashboard)
            bl.log("warm-up: one job each way")
            bl.corral_run(srv)
            ray_job_run(jc)
            corral, ray_jobs = [], []
            for i in range(seq):  # interleaved, so background load hits both alike
                corral.append(bl.corral_run(srv))
                ray_jobs.append(ray_job_run(jc))
                bl.log(f"  seq {i + 1}/{seq}: corral {corral[-1]:.3f} s, "
                       f"Ray Jobs {ray_jobs[-1]:.3f} s")
            corral_n, completed = corral_burst(srv, n)
            bl.log(f"  corral: {n} jobs in {corral_n:.1f} s ({completed} Completed)")
            ray_n = ray_job_burst(jc, n)
            bl.log(f"  Ray Jobs: {n} jobs in {ray_n:.1f} s")
        finally:
            bl.stop_server(srv)
    c_med, r_med = statistics.median(corral), statistics.median(ray_jobs)
    return {"seq": seq, "jobs": n, "corral_median_s": c_med, "ray_jobs_median_s": r_med,
            "latency_ratio": r_med / c_med, "corral_burst_s": corral_n,
            "ray_jobs_burst_s": ray_n, "burst_ratio": ray_n / corral_n,
            "corral_completed": completed, "corral_s": corral, "ray_jobs_s": ray_jobs}


def input_run(srv: bl.Server, data: pathlib.Path | None) -> float:
    """A job that reads nothing (`true`), with `data` as its input channel if given."""
    body = bl.job_body("true")
    if data is not None:
        body["algorithm"]["inputs"] = [{"name": "data_url",
                                        "remote": {"obs": {"obs_url": str(data)}}}]
    t0 = time.perf_counter()
    r = srv.http.post(srv.path("/training-jobs"), json=body)
    if r.status_code != 201:
        raise SystemExit(f"submit failed: {r.status_code} {r.text}")
    bl.wait_phase(srv, r.json()["metadata"]["id"], "Completed", timeout=1800)
    return time.perf_counter() - t0


def driver_peak_rss(srv: bl.Server, stop: threading.Event, peak: list[float]) -> None:
    """The most resident memory of the server's Ray driver process until `stop`."""
    import psutil

    while not stop.wait(0.05):
        with contextlib.suppress(psutil.Error):
            for child in psutil.Process(srv.proc.pid).children(recursive=True):
                if "corral.executors.ray.bridge" in " ".join(child.cmdline()):
                    peak[0] = max(peak[0], child.memory_info().rss / 2**20)


def run_inputs(mb: int) -> dict[str, Any]:
    with ray_cluster() as (address, _), \
            tempfile.TemporaryDirectory(prefix="corral-bench-") as tmp:
        data = pathlib.Path(tmp) / "data"
        data.mkdir()
        for i in range(4):  # four files of a quarter each, random (nothing compresses)
            with (data / f"part-{i}.bin").open("wb") as fh:
                for _ in range(mb // 4):
                    fh.write(os.urandom(2**20))
        t0 = time.perf_counter()
        shutil.copytree(data, pathlib.Path(tmp) / "copy")
        copy_s = time.perf_counter() - t0
        shutil.rmtree(pathlib.Path(tmp) / "copy")
        os.environ["CORRAL_RAY_ADDRESS"] = address
        srv = bl.start_server(pathlib.Path(tmp) / "home")
        try:
            input_run(srv, None)  # warm-up: the node's agent
            bare = input_run(srv, None)
            peak, stop = [0.0], threading.Event()
            watcher = threading.Thread(target=driver_peak_rss, args=(srv, stop, peak))
            watcher.start()
            time.sleep(0.5)
            idle = peak[0]
            with_input = input_run(srv, data)
            stop.set()
            watcher.join()
        finally:
            bl.stop_server(srv)
    ship = with_input - bare
    return {"mb": mb, "job_without_input_s": bare, "job_with_input_s": with_input,
            "shipping_s": ship, "local_copy_s": copy_s, "ratio": ship / copy_s,
            "mb_per_s": mb * 2**20 / 1e6 / ship, "driver_rss_idle_mb": idle,
            "driver_rss_peak_mb": peak[0]}


def report_inputs(r: dict[str, Any]) -> str:
    return "\n".join([
        "| figure | value |", "|---|---|",
        f"| job with a {r['mb']} MiB input, minus the same job without | "
        f"{r['shipping_s']:.1f} s ({r['mb_per_s']:.0f} MB/s) |",
        f"| copying the same folder on this disk (baseline) | {r['local_copy_s']:.1f} s |",
        f"| shipping / local copy | {r['ratio']:.1f}x |",
        f"| the server's Ray driver, resident memory idle / peak | "
        f"{r['driver_rss_idle_mb']:.0f} / {r['driver_rss_peak_mb']:.0f} MiB |",
    ])


def report(r: dict[str, Any]) -> str:
    def line(what: str, c: float, ray: float, ratio: float) -> str:
        ok = "PASS" if ratio >= 10 else "MISS"
        return f"| {what} | {c:.3f} s | {ray:.3f} s | {ratio:.2f}x | >= 10x {ok} |"

    return "\n".join([
        "| figure | corral on Ray | Ray Jobs | Ray Jobs / corral | target |",
        "|---|---|---|---|---|",
        line(f"trivial job, median of {r['seq']}", r["corral_median_s"],
             r["ray_jobs_median_s"], r["latency_ratio"]),
        line(f"{r['jobs']} jobs at once", r["corral_burst_s"], r["ray_jobs_burst_s"],
             r["burst_ratio"]),
        f"\ncorral completed {r['corral_completed']} of {r['jobs']}; "
        f"{CPUS} cores in the cluster.",
    ])


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seq", type=int, default=10)
    p.add_argument("--jobs", type=int, default=100)
    p.add_argument("--quick", action="store_true", help="3 sequential, 10 at once")
    p.add_argument("--json", help="also write every figure to this file")
    p.add_argument("--inputs", type=int, metavar="MB",
                   help="measure shipping an input of MB MiB instead")
    a = p.parse_args(argv)
    seq, n = (3, 10) if a.quick else (a.seq, a.jobs)
    if a.inputs:
        r = run_inputs(a.inputs)
        print(report_inputs(r))
    else:
        r = run_all(seq, n)
        print(report(r))
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(r, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
