"""Small builders for test objects: override what a test cares about, default the rest."""

from __future__ import annotations

import pathlib
import socket
import time
import uuid
from collections.abc import Callable
from typing import Any

import psutil

from corral.store import rows


def write_code(root: pathlib.Path, source: str, name: str = "train.py") -> pathlib.Path:
    """A code directory holding one boot file with `source`; returns the directory."""
    code = root / f"code-{uuid.uuid4().hex[:8]}"
    code.mkdir(parents=True)
    (code / name).write_text(source)
    return code


def make_task(job_id: str, attempt: int = 1, **overrides: Any) -> rows.Task:
    """A task row of a job (worker-0 on `local`, running, unless overridden)."""
    fields: dict[str, Any] = {
        "job_id": job_id, "attempt": attempt, "name": "worker-0", "rank": 0,
        "node": "local", "state": "running", "launch_id": uuid.uuid4().hex[:16],
        "gpu_ids": "", "accel_ids": None, "handle": None, "exit_code": None, "message": None,
        "launched_at": None, "ended_at": None, "kill_sent_at": None}
    fields.update(overrides)
    return rows.Task(**fields)


def make_job(*, name: str | None = None, code_dir: pathlib.Path | str | None = None,
             boot_file: str = "train.py", command: str | None = None,
             flavor_id: str = "corral.cpu.1u", node_count: int = 1, retries: int | None = None,
             parameters: dict[str, Any] | None = None,
             outputs: dict[str, str] | None = None, inputs: dict[str, str] | None = None,
             environments: dict[str, str] | None = None,
             annotations: dict[str, str] | None = None,
             fault_tolerance: dict[str, Any] | None = None,
             **overrides: Any) -> dict[str, Any]:
    """A ModelArts create body. Give `code_dir` (+ boot_file) or `command`;
    `fault_tolerance` is corral's `spec.fault_tolerance`."""
    alg: dict[str, Any] = {}
    if command is not None:
        alg["command"] = command
    if code_dir is not None:
        alg.update(code_dir=str(code_dir), boot_file=boot_file)
    if parameters:
        alg["parameters"] = [{"name": k, "value": v} for k, v in parameters.items()]
    if inputs:
        alg["inputs"] = [{"name": k, "remote": {"obs": {"obs_url": v}}} for k, v in inputs.items()]
    if outputs:
        alg["outputs"] = [{"name": k, "remote": {"obs": {"obs_url": v}}}
                          for k, v in outputs.items()]
    if environments:
        alg["environments"] = environments
    meta: dict[str, Any] = {"name": name or f"job-{uuid.uuid4().hex[:10]}"}
    if retries is not None or annotations:
        meta["annotations"] = {**({"fault-tolerance/job-retry-num": str(retries)}
                                  if retries is not None else {}), **(annotations or {})}
    body: dict[str, Any] = {
        "kind": "job", "metadata": meta, "algorithm": alg,
        "spec": {"resource": {"flavor_id": flavor_id, "node_count": node_count}},
    }
    if fault_tolerance is not None:
        body["spec"]["fault_tolerance"] = fault_tolerance
    for key, value in overrides.items():
        body[key] = value
    return body


# --- waiting on real processes (integration tests) ----------------------------------------


def wait_for(cond: Callable[[], Any], timeout: float = 30.0, what: str = "") -> Any:
    """Poll `cond` until it returns something truthy, and return that; fail after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or cond}")
        time.sleep(0.02)


#: the ports free_port has handed out in this process
_handed_out: set[int] = set()


def free_port() -> int:
    """A loopback TCP port that is free now and that this process was never handed before.

    (The kernel may well give the same free port to two binds in a row: two servers
    started on it would both answer at one URL, the second having failed to listen.)"""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in _handed_out:
            _handed_out.add(port)
            return port


def listens(pid: int, port: int) -> bool:
    """Process `pid` itself listens on `port`: what answers there is that process, not
    another one that took the port first."""
    proc = psutil.Process(pid)
    conns = proc.net_connections("tcp") if hasattr(proc, "net_connections") \
        else proc.connections("tcp")
    return any(c.status == psutil.CONN_LISTEN and c.laddr.port == port for c in conns)


def alive(pid: int) -> bool:
    """The process exists and is not a zombie (a zombie runs nothing any more)."""
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False
