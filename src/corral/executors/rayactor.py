"""The small Ray actor that runs one task's process on a node of a Ray cluster.

One actor per task: it holds the flavor's resources for as long as it lives, unpacks the
attempt's code (shipped through the object store), starts the process with its output in
a file on its node, and answers the server's questions (has it ended, what did it print,
how busy is it) until the server retires it. It is named and detached, so it outlives a
server restart and the next server finds it by name.

This module uses only the standard library (and psutil, which Ray itself depends on): the
executor ships it to the nodes by value, so a node needs Ray but not corral.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from typing import Any

#: argv[0] placeholder: the node's own Python (the one running the actor)
NODE_PYTHON = "{node-python}"
#: path prefix placeholders: the unpacked code snapshot, and the task's own directory
CODE = "{code}"
ROOT = "{root}"
LAUNCH_ENV = "CORRAL_LAUNCH_ID"
NODE_ENV = "CORRAL_RAY_NODE_ID"
PR_SET_PDEATHSIG = 1


def _death_signal() -> Any:
    """A pre-exec hook making the task die with its actor (and so with its node, as on a
    real machine). Resolved before the fork: the child must only make the call."""
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    return lambda: prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


class TaskRunner:
    """Starts one task's process when created; the server then polls and retires it."""

    def __init__(self, payload: dict[str, Any], code: bytes | None) -> None:
        import ray

        self.node_id: str = ray.get_runtime_context().get_node_id()
        self.launch_id: str = payload["launch_id"]
        self.root = tempfile.mkdtemp(prefix=f"corral-{payload['task']}-{self.launch_id}-")
        self.log_path = os.path.join(self.root, "task.log")
        self.proc: subprocess.Popen[bytes] | None = None
        self.exit_code: int | None = None
        self.ended = threading.Event()
        self._cpu_prev: tuple[float, float] | None = None
        try:
            self._start(payload, code, [str(g) for g in ray.get_gpu_ids()])
        except (OSError, tarfile.TarError, ValueError) as exc:
            # Reported as a shell reports a command it cannot run: in the log, code 127.
            with open(self.log_path, "ab") as fh:
                fh.write(f"corral: cannot start {payload['task']}: {exc}\n".encode())
            self.exit_code = 127
            self.ended.set()

    def _start(self, payload: dict[str, Any], code: bytes | None, gpu_ids: list[str]) -> None:
        code_dir = os.path.join(self.root, "code")
        if code is not None:
            with tarfile.open(fileobj=io.BytesIO(code)) as tar:
                tar.extractall(code_dir, filter="data")

        def local(value: str) -> str:
            return value.replace(CODE, code_dir).replace(ROOT, self.root)

        argv = [local(a) for a in payload["argv"]]
        if argv and argv[0] == NODE_PYTHON:
            argv[0] = sys.executable
        for out in payload["outputs"]:
            os.makedirs(out, exist_ok=True)
        env = {k: local(v) for k, v in payload["env"].items()}
        env.update({LAUNCH_ENV: self.launch_id, NODE_ENV: self.node_id,
                    "CUDA_VISIBLE_DEVICES": ",".join(gpu_ids)})
        cwd = local(payload["cwd"])
        os.makedirs(cwd, exist_ok=True)
        if payload["shell"]:
            # The command line, then its arguments as "$@" (what the local wrapper does).
            argv = ["/bin/sh", "-c", argv[0] + ' "$@"', "sh", *argv[1:]]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True, close_fds=True,
                preexec_fn=_death_signal())
        threading.Thread(target=self._reap, daemon=True).start()

    def _reap(self) -> None:
        assert self.proc is not None
        rc = self.proc.wait()
        self.exit_code = 128 - rc if rc < 0 else rc
        # Whatever the task left in its group goes with it.
        with contextlib.suppress(OSError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.ended.set()

    # --- what the server asks -----------------------------------------------------------

    def info(self) -> dict[str, Any]:
        return {"node_id": self.node_id, "pid": self.proc.pid if self.proc else 0,
                "exit_code": self.exit_code}

    def wait(self) -> int:
        """The exit code, once the process has ended (the server keeps one call pending)."""
        self.ended.wait()
        assert self.exit_code is not None
        return self.exit_code

    def read_log(self, offset: int, max_bytes: int) -> bytes:
        try:
            with open(self.log_path, "rb") as fh:
                fh.seek(offset)
                return fh.read(max_bytes)
        except FileNotFoundError:
            return b""

    def signal(self, force: bool) -> None:
        """SIGTERM the task's group, or SIGKILL it and every process carrying its marker."""
        if self.proc is None:
            return
        with contextlib.suppress(OSError):
            os.killpg(self.proc.pid, signal.SIGKILL if force else signal.SIGTERM)
        if force:
            self._kill_marked()

    def sample(self) -> tuple[float, float] | None:
        """(CPU percent of one core, resident MiB) of the task's whole process tree."""
        import psutil

        if self.proc is None or self.ended.is_set():
            return None
        try:
            top = psutil.Process(self.proc.pid)
            tree = [top, *top.children(recursive=True)]
        except psutil.Error:
            return None
        cpu = rss = 0.0
        for p in tree:
            with contextlib.suppress(psutil.Error):
                t = p.cpu_times()
                cpu += t.user + t.system
                rss += p.memory_info().rss
        now = time.time()
        prev = self._cpu_prev or (top.create_time(), 0.0)
        self._cpu_prev = (now, cpu)
        pct = max(0.0, (cpu - prev[1]) / (now - prev[0]) * 100.0) if now > prev[0] else 0.0
        return pct, rss / 2**20

    def finish(self) -> None:
        """Before the server kills this actor: nothing of the task and its files stays."""
        self.signal(force=True)
        shutil.rmtree(self.root, ignore_errors=True)

    def _kill_marked(self) -> None:
        marker = f"{LAUNCH_ENV}={self.launch_id}".encode()
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                with open(f"/proc/{entry.name}/environ", "rb") as fh:
                    env = fh.read()
            except OSError:
                continue
            if marker in env.split(b"\0"):
                with contextlib.suppress(OSError):
                    os.kill(int(entry.name), signal.SIGKILL)
