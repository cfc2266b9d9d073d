"""corral on a machine with NVIDIA GPUs: what a user of one would check first.

    python benchmarks/gpu_check.py [--seconds 30] [--json PATH] [--home DIR]
    python benchmarks/gpu_check.py --cpu          # the same steps without a GPU (a rehearsal)

It starts an embedded corral server (SQLite, local processes, samples every second) and:

1. lists the flavors: the GPUs detected, and a `corral.gpu.1x` flavor;
2. runs a CUDA PyTorch job on `corral.gpu.1x` (matrix products, then a small model
   trained on random data), which prints what it sees: `CUDA_VISIBLE_DEVICES`, the
   device, TFLOP/s, its loss;
3. meanwhile a CPU job, which must see no GPU (`CUDA_VISIBLE_DEVICES` empty), and a second
   GPU job, which must wait while the first holds the only GPU, saying why, and run once
   it is free;
4. reads the first job's resource series, those the console's charts draw
   (`GET .../metrics/worker-0`: `gpuUtil`, `gpuMemUsage`, `memUsedMB`), and the node's
   use over time (`GET /corral/node-usage`, the Nodes page's charts);
5. opens a notebook on `corral.gpu.1x`, runs code in its kernel through corral's proxy
   (as JupyterLab's page does, over a websocket) that puts a tensor on the GPU, and
   reads the session's GPU memory from its resource series;
6. prints a table of every check (PASS or FAIL, with what was seen) and exits 1 if any
   failed.

It needs PyTorch with CUDA and nvidia-ml-py in the Python that runs it, and JupyterLab for
the notebook step. It asserts what a user would notice, never a timing; the figures
(TFLOP/s, utilisation) are printed for a person to read. docs/performance.md keeps the
last run's table.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import pathlib
import sys
import tempfile
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import httpx

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
import runner  # noqa: E402  (examples/runner.py: the `corral` commands, as a user types them)

from corral import server, settings  # noqa: E402
from corral.sdk import client, notebooks  # noqa: E402

T = TypeVar("T")
FINAL = {"Completed", "Failed", "Terminated", "Abnormal"}
NB_FAILED = {"CREATE_FAILED", "START_FAILED", "ERROR"}

#: The first GPU job: matrix products for a while (the GPU busy, memory held), then a small
#: model trained on random data. Prints what it sees; `corral:metrics` lines for the charts.
GPU_JOB = """
import os, sys, time
import torch

print("CUDA_VISIBLE_DEVICES=" + repr(os.environ.get("CUDA_VISIBLE_DEVICES")), flush=True)
want_gpu = sys.argv[1] == "cuda"
print("cuda available:", torch.cuda.is_available(), "devices:", torch.cuda.device_count())
if want_gpu and not torch.cuda.is_available():
    sys.exit("no GPU visible")
dev = torch.device(sys.argv[1])
if want_gpu:
    print("device:", torch.cuda.get_device_name(0), flush=True)
seconds = float(sys.argv[2])
n = 8192 if want_gpu else 512
dtype = torch.bfloat16 if want_gpu else torch.float32
a = torch.randn(n, n, device=dev, dtype=dtype)
b = torch.randn(n, n, device=dev, dtype=dtype)
held = torch.empty(2 * 2**30 if want_gpu else 1, dtype=torch.uint8, device=dev)
end, step = time.time() + seconds * 0.7, 0
while time.time() < end:
    if want_gpu:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(10):
        c = a @ b
    if want_gpu:
        torch.cuda.synchronize()
    step += 1
    tflops = 10 * 2 * n**3 / (time.perf_counter() - t0) / 1e12
    print(f"corral:metrics step={step} tflops={tflops:.1f}", flush=True)

torch.manual_seed(0)
x = torch.randn(4096, 64, device=dev)
y = (x[:, :8].sum(dim=1, keepdim=True) > 0).float()
model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(),
                            torch.nn.Linear(256, 1)).to(dev)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
end = time.time() + seconds * 0.3
while time.time() < end:
    loss = torch.nn.functional.binary_cross_entropy_with_logits(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    step += 1
    if step % 50 == 0:
        print(f"corral:metrics step={step} loss={loss.item():.4f}", flush=True)
print(f"final loss {loss.item():.4f}", flush=True)
"""

#: What a job on a CPU flavor, or the second GPU job, prints: what it was given.
PEEK_JOB = """
import os, torch
print("CUDA_VISIBLE_DEVICES=" + repr(os.environ.get("CUDA_VISIBLE_DEVICES")), flush=True)
print("cuda available:", torch.cuda.is_available(), flush=True)
"""

#: Run in the notebook's kernel: a tensor on the GPU, kept while the check reads the
#: session's resource series.
KERNEL_CODE = """
import os, torch
print("CUDA_VISIBLE_DEVICES=" + repr(os.environ.get("CUDA_VISIBLE_DEVICES")))
dev = "cuda" if torch.cuda.is_available() else "cpu"
kept = torch.ones(2**28, device=dev)   # 1 GiB
print("kernel device:", torch.cuda.get_device_name(0) if dev == "cuda" else "cpu",
      "sum:", int(kept.sum().item()))
"""


class Checks:
    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def add(self, name: str, ok: bool, seen: Any) -> None:
        self.rows.append({"check": name, "ok": bool(ok), "seen": str(seen)})
        print(f"[{'PASS' if ok else 'FAIL'}] {name}: {seen}", flush=True)

    def table(self) -> str:
        width = max(len(r["check"]) for r in self.rows)
        lines = [f"| {'check':<{width}} | result | seen |",
                 f"|{'-' * (width + 2)}|--------|------|"]
        for r in self.rows:
            seen = r["seen"].replace("|", "/").replace("\n", " ")[:160]
            lines.append(f"| {r['check']:<{width}} | {'PASS' if r['ok'] else 'FAIL':<6} | {seen} |")
        return "\n".join(lines)


def wait(what: str, check: Callable[[], T | None], timeout: float) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.5)
    raise TimeoutError(f"gave up waiting for {what} after {timeout:.0f} s")


def submit(api: client.Client, work: pathlib.Path, name: str, code: str, args: list[str],
           flavor: str) -> str:
    script = work / f"{name}.py"
    script.write_text(textwrap.dedent(code))
    body = {"kind": "job", "metadata": {"name": name},
            "algorithm": {"command": " ".join([sys.executable, str(script), *args])},
            "spec": {"resource": {"flavor_id": flavor, "node_count": 1}}}
    return str(api.create_job(body)["metadata"]["id"])


def phase(api: client.Client, job_id: str) -> str:
    return str(api.get_job(job_id)["status"]["phase"])


def ended(api: client.Client, job_id: str, timeout: float) -> dict[str, Any]:
    def final() -> dict[str, Any] | None:
        job = api.get_job(job_id)
        return job if job["status"]["phase"] in FINAL else None

    return wait(f"job {job_id} to end", final, timeout)


def log_of(api: client.Client, job_id: str) -> str:
    return str(api.log_preview(job_id).get("content", ""))


def series(api: client.Client, job_id: str) -> dict[str, list[float]]:
    got = api.metrics(job_id)
    return {m["metric"]: [float(v) for v in m["value"]] for m in got["metrics"]}


def visible(log: str) -> str | None:
    for line in log.splitlines():
        if line.startswith("CUDA_VISIBLE_DEVICES="):
            return line.split("=", 1)[1]
    return None


def check_flavors(s: runner.Session, checks: Checks, gpu: bool) -> str:
    flavors = s.api.flavors()["flavors"]
    ids = [f["flavor_id"] for f in flavors]
    info = s.api.info()
    gpus = sum(n["gpus"] for n in info["nodes"])
    checks.add("GPUs detected (NVML)", gpus > 0 or not gpu,
               f"{gpus} on {len(info['nodes'])} node(s)")
    want = "corral.gpu.1x" if gpu else "corral.cpu.1u"
    found = next((f for f in flavors if f["flavor_id"] == want), None)
    checks.add(f"flavor {want}", found is not None,
               json.dumps(found["flavor_info"]) if found else f"flavors: {ids}")
    return want


def check_jobs(s: runner.Session, checks: Checks, flavor: str, seconds: float,
               gpu: bool) -> str:
    api, work = s.api, s.work
    dev = "cuda" if gpu else "cpu"
    first = submit(api, work, "gpu-train", GPU_JOB, [dev, str(seconds)], flavor)
    wait("the first GPU job to run", lambda: phase(api, first) in {"Running", *FINAL}, 120)
    second = submit(api, work, "gpu-second", PEEK_JOB, [], flavor)
    cpu_job = submit(api, work, "cpu-peek", PEEK_JOB, [], "corral.cpu.1u")
    time.sleep(3)  # a few scheduling passes
    status = api.get_job(second)["status"]
    checks.add("second GPU job waits while the first holds the GPU, saying why",
               (status["phase"] == "Pending" and "GPU" in str(status.get("reason")))
               or not gpu, f"{status['phase']}: {status.get('reason')}")
    waiting = [f"{j['name']}: {j.get('reason') or j.get('wait_code')}"
               for pool in api.queue()["pools"] for j in pool["jobs"]]
    checks.add("`corral queue` lists the waiting jobs", len(waiting) >= 1 or not gpu,
               "; ".join(waiting))

    cpu_end = ended(api, cpu_job, 120)
    cpu_seen = visible(log_of(api, cpu_job))
    checks.add("CPU job sees no GPU", cpu_end["status"]["phase"] == "Completed"
               and cpu_seen in ("''", "None"), f"{cpu_end['status']['phase']}, "
               f"CUDA_VISIBLE_DEVICES={cpu_seen}; {log_of(api, cpu_job)[-200:]!r}")

    first_end = ended(api, first, seconds + 120)
    log = log_of(api, first)
    checks.add("CUDA job completed", first_end["status"]["phase"] == "Completed",
               f"{first_end['status']['phase']} {first_end['status'].get('reason') or ''}; "
               + " / ".join(line for line in log.splitlines()
                            if line.startswith(("CUDA_VISIBLE", "device:", "final loss"))))
    checks.add("CUDA_VISIBLE_DEVICES pins the GPU", visible(log) == "'0'" or not gpu,
               visible(log))
    res = series(api, first)
    tflops = res.get("tflops") or [0.0]
    checks.add("job's reported metrics (tflops, loss)",
               bool(res.get("tflops")) and bool(res.get("loss")),
               f"median TFLOP/s {sorted(tflops)[len(tflops) // 2]:.0f}, "
               f"last loss {(res.get('loss') or [float('nan')])[-1]}")
    util, gmem, mem = (res.get(k) or [0.0] for k in ("gpuUtil", "gpuMemUsage", "memUsedMB"))
    checks.add("resource series: gpuUtil (console chart)", max(util) > 0 or not gpu,
               f"{len(util)} samples, max {max(util):.0f} %")
    checks.add("resource series: gpuMemUsage (console chart)", max(gmem) > 0 or not gpu,
               f"max {max(gmem):.2f} % of the GPU's memory")
    checks.add("resource series: memUsedMB", max(mem) > 0, f"max {max(mem):.0f} MB")

    second_end = ended(api, second, 180)
    checks.add("second GPU job ran once the GPU was free",
               second_end["status"]["phase"] == "Completed",
               f"{second_end['status']['phase']}; CUDA_VISIBLE_DEVICES="
               f"{visible(log_of(api, second))}")
    return first


def check_node_usage(s: runner.Session, checks: Checks, gpu: bool) -> None:
    try:
        found = s.api.node_usage(minutes=15)
    except client.ClientError as exc:
        checks.add("node use over time (Nodes page)", False, exc)
        return
    for node in found["nodes"]:
        gutil = node.get("gpu_util") or [0.0]
        gmem = node.get("gpu_mem_mb") or [0.0]
        checks.add(f"node {node['name']}: use over time (Nodes page)",
                   bool(node["cpu_percent"]) and (max(gutil) > 0 or not gpu),
                   f"{len(node['times'])} samples; CPU max {max(node['cpu_percent'] or [0]):.0f} %"
                   f", GPU util max {max(gutil):.0f} %, GPU memory max {max(gmem):.0f} MB of "
                   f"{node['gpu_memory_mb']}")


def check_notebook(s: runner.Session, checks: Checks, flavor: str, gpu: bool) -> None:
    nbs = notebooks.Notebooks(s.api)
    nb_id = s.output("notebook", "create", "gpu-notebook", "--flavor", flavor,
                     "--idle", "10m").split()[-1]

    def running() -> dict[str, Any] | None:
        got = nbs.get(nb_id)
        if got["status"] in NB_FAILED:
            raise RuntimeError(f"notebook {got['status']}: {got.get('fail_reason')}")
        return got if got["status"] == "RUNNING" else None

    t0 = time.monotonic()
    try:
        wait("the notebook to run", running, 240)
    except (TimeoutError, RuntimeError) as exc:
        checks.add("notebook on the GPU runs", False, exc)
        return
    checks.add("notebook on the GPU runs", True, f"RUNNING after {time.monotonic() - t0:.0f} s")
    url = httpx.URL(s.output("notebook", "open", nb_id).split()[-1])
    origin = f"{url.scheme}://{url.netloc.decode()}"
    with httpx.Client(base_url=origin, follow_redirects=True, timeout=60) as browser:
        browser.get(str(url))
        out = run_in_kernel(browser, nb_id, KERNEL_CODE)
        checks.add("notebook kernel sees the GPU through the proxy",
                   ("NVIDIA" in out and "CUDA_VISIBLE_DEVICES='0'" in out)
                   or (not gpu and "kernel device: cpu" in out), out.strip().replace("\n", " / "))
        session_job = nbs.get(nb_id).get("job_id")
        if session_job:
            time.sleep(3)  # a few samples with the tensor held
            gmem = series(s.api, session_job).get("gpuMemUsage") or [0.0]
            checks.add("notebook session's GPU memory in its series", max(gmem) > 0 or not gpu,
                       f"max {max(gmem):.2f} %")
    nbs.stop(nb_id)


def run_in_kernel(browser: httpx.Client, nb_id: str, code: str) -> str:
    """Start a kernel through the proxy, run `code` over the kernel's websocket as
    JupyterLab's page does, and return what it printed (errors included)."""
    from httpx_ws import WebSocketSession, connect_ws

    base = f"/notebooks/{nb_id}/api/kernels"
    kernel = browser.post(base, json={"name": "python3"})
    kernel.raise_for_status()
    kid = kernel.json()["id"]
    session = uuid.uuid4().hex
    msg_id = uuid.uuid4().hex
    request = {"header": {"msg_id": msg_id, "username": "check", "session": session,
                          "msg_type": "execute_request", "version": "5.3",
                          "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
               "parent_header": {}, "metadata": {}, "channel": "shell",
               "content": {"code": code, "silent": False, "store_history": False,
                           "user_expressions": {}, "allow_stdin": False,
                           "stop_on_error": True}}
    printed: list[str] = []
    ws: WebSocketSession
    with connect_ws(f"{base}/{kid}/channels?session_id={session}", browser) as ws:
        ws.send_text(json.dumps(request))
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            msg = json.loads(ws.receive_text(timeout=120))
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "stream":
                printed.append(content["text"])
            elif kind == "error":
                printed.append(f"{content['ename']}: {content['evalue']}")
            elif kind == "status" and content.get("execution_state") == "idle":
                break
    return "".join(printed)


@contextlib.contextmanager
def session(home: pathlib.Path | None) -> Iterator[runner.Session]:
    with contextlib.ExitStack() as stack:
        if home is None:
            home = pathlib.Path(stack.enter_context(
                tempfile.TemporaryDirectory(prefix="corral-gpu-"))) / "home"
        home = home.absolute()
        embedded = server.start_embedded(settings.Settings(home=home, metrics_interval=1.0))
        stack.callback(embedded.stop)
        print(f"a corral server at {embedded.url} (CORRAL_HOME={home})", flush=True)
        yield runner.Session(home, embedded.url)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=30.0, help="how long the CUDA job runs")
    p.add_argument("--cpu", action="store_true", help="rehearse on a machine without GPUs")
    p.add_argument("--no-notebook", action="store_true")
    p.add_argument("--home", type=pathlib.Path)
    p.add_argument("--json", type=pathlib.Path)
    args = p.parse_args()
    gpu = not args.cpu
    checks = Checks()
    with session(args.home) as s:
        steps: list[tuple[str, Callable[[], Any]]] = []
        flavor = check_flavors(s, checks, gpu)
        steps.append(("jobs", lambda: check_jobs(s, checks, flavor, args.seconds, gpu)))
        steps.append(("node use", lambda: check_node_usage(s, checks, gpu)))
        if not args.no_notebook:
            steps.append(("notebook", lambda: check_notebook(s, checks, flavor, gpu)))
        for name, step in steps:
            try:
                step()
            except Exception as exc:  # one broken step must not hide the others' results
                checks.add(f"{name}: ran to the end", False, f"{type(exc).__name__}: {exc}")
    print("\n" + checks.table(), flush=True)
    if args.json:
        args.json.write_text(json.dumps({"checks": checks.rows}, indent=1))
    return 0 if all(r["ok"] for r in checks.rows) else 1


if __name__ == "__main__":
    sys.exit(main())
