"""Runs tasks as local processes, each in its own process group, and finds them again.

Every task runs under a tiny `/bin/sh` wrapper that (1) claims its launch by creating a
claim file exclusively and writing its pid there, (2) runs the task, and (3) appends the
task's exit code to the claim file. That is what lets a server that was killed at any line
and started again settle every launch exactly once: a claim file with a pid says the
launch ran (alive: adopt it; gone: read its exit code, or call it lost if the wrapper was
killed before writing one); no claim file means it never ran, and the restarted server
claims it first ("abandoned") so that a wrapper still starting up gives up instead of
running the task a second time.

One file per launch, because creating a file is what costs on some disks. Wrappers of
earlier versions wrote the exit code to a separate `.exit` file, which is still read.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable

import psutil

from corral.domain import errors, resources
from corral.executors import base, gpus

# $0 is the control-file prefix, "$@" the task's argv. A trapped TERM lets the wrapper
# outlive the task it forwards the signal to (the whole group gets it) and still record
# the exit code; a trapped signal is reset to its default in the exec'd task.
# After the claim, $1 says what follows: "--" and an argv to run, or "-c", a shell command
# and its arguments (run in a forked subshell: cheaper than starting a second shell, and an
# `exit` in the command still leaves this shell to record the code).
WRAPPER = (
    'set -C; { echo $$ > "$0.claim"; } 2>/dev/null || exit 75; set +C; '
    'trap : TERM INT HUP; '
    'if [ "$1" = -c ]; then c=$2; shift 2; (trap : TERM INT HUP; eval "$c \\"\\$@\\""); '
    'else shift; "$@"; fi; rc=$?; echo $rc >> "$0.claim"; exit $rc'
)
ABANDONED = "abandoned"
#: set in every task's environment, so its processes can be found wherever they moved
LAUNCH_ENV = "CORRAL_LAUNCH_ID"


class LocalExecutor:
    """The embedded default: tasks are processes on this machine."""

    def __init__(self, node: resources.Node) -> None:
        self._node = node
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self._ps: dict[str, psutil.Process] = {}
        self._cpu_prev: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()
        self._watcher = _ExitWatcher()
        self._watcher.start()

    def nodes(self) -> list[resources.Node]:
        return [self._node]

    def set_waker(self, wake: Callable[[], None]) -> None:
        self._watcher.wake = wake

    def launch(self, spec: base.LaunchSpec) -> base.Handle:
        try:
            proc = _spawn(spec)
        except OSError as exc:
            raise errors.LaunchError(f"cannot start {spec.task}: {exc}") from None
        start = _start_ticks(proc.pid)
        handle = base.Handle(node=spec.node, task=spec.task, pid=proc.pid,
                             start_time=start or 0.0,
                             control_dir=spec.control_dir, launch_id=spec.launch_id)
        with self._lock:
            self._procs[spec.launch_id] = proc
        self._watcher.watch(proc.pid)
        return handle

    def poll(self, handle: base.Handle) -> base.Status:
        with self._lock:
            proc = self._procs.get(handle.launch_id)
        if proc is not None:
            rc = proc.poll()
            if rc is None:
                return base.Status(base.State.RUNNING, handle=handle)
            # What the task left in its group goes at once; finding processes that left the
            # group costs a scan of /proc, which the scheduler asks for through clean_up
            # when a job is being stopped or failed.
            _kill_group(handle, signal.SIGKILL)
            return base.Status(base.State.EXITED, exit_code=_exit_code(rc), handle=handle)
        return self._settle(handle)

    def cancel(self, handle: base.Handle, *, force: bool) -> None:
        if force:
            _kill_leftovers(handle)
        else:
            _kill_group(handle, signal.SIGTERM)

    def adopt(self, handle: base.Handle) -> base.Status:
        status = self._settle(handle)
        if status.state is base.State.RUNNING:
            self._watcher.watch(handle.pid)
        return status

    def recover(self, spec: base.LaunchSpec) -> base.Status:
        prefix = control_prefix(spec)
        os.makedirs(spec.control_dir, exist_ok=True)
        try:
            fd = os.open(prefix + ".claim", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            pass
        else:
            os.write(fd, ABANDONED.encode())
            os.close(fd)
            return base.Status(base.State.NOT_STARTED)
        content = _read_claim(prefix + ".claim")
        if content in ("", ABANDONED):
            return base.Status(base.State.NOT_STARTED)
        pid = int(content.split()[0])
        start = _start_ticks(pid)
        owned = start is not None and _runs_prefix(pid, prefix)
        handle = base.Handle(node=spec.node, task=spec.task, pid=pid,
                             start_time=start if owned and start else 0.0,
                             control_dir=spec.control_dir, launch_id=spec.launch_id)
        return self.adopt(handle)

    def sample(self, handle: base.Handle) -> base.Sample | None:
        proc = self._process(handle)
        if proc is None:
            return None
        try:
            tree = [proc, *proc.children(recursive=True)]
        except psutil.Error:
            return None
        cpu_total = 0.0
        rss = 0
        pids = []
        for p in tree:
            with contextlib.suppress(psutil.Error):
                t = p.cpu_times()
                cpu_total += t.user + t.system
                rss += p.memory_info().rss
                pids.append(p.pid)
        now = time.time()
        prev = self._cpu_prev.get(handle.launch_id)
        if prev is None:
            # First look at this task: its average since it started.
            with contextlib.suppress(psutil.Error):
                prev = (proc.create_time(), 0.0)
        self._cpu_prev[handle.launch_id] = (now, cpu_total)
        cpu_pct = 0.0
        if prev and now > prev[0]:
            cpu_pct = max(0.0, (cpu_total - prev[1]) / (now - prev[0]) * 100.0)
        gpu_util, gpu_mem = gpus.usage(pids, _gpu_ids_of(handle))
        return base.Sample(cpu_percent=cpu_pct, rss_mb=rss / 2**20, gpu_util=gpu_util,
                           gpu_mem_mb=gpu_mem)

    def clean_up(self, handle: base.Handle) -> None:
        _kill_leftovers(handle)

    def release(self, handle: base.Handle) -> None:
        with self._lock:
            self._procs.pop(handle.launch_id, None)
        self._ps.pop(handle.launch_id, None)
        self._cpu_prev.pop(handle.launch_id, None)

    def close(self) -> None:
        self._watcher.stop()

    def _settle(self, handle: base.Handle) -> base.Status:
        """State of a task this server did not start (or no longer holds a Popen for)."""
        if handle.start_time and _start_ticks(handle.pid) == handle.start_time:
            return base.Status(base.State.RUNNING, handle=handle)
        code = _read_exit(handle)
        # Whatever is left of the task goes: a lost task must not keep a core corral now
        # counts as free.
        _kill_leftovers(handle)
        if code is not None:
            return base.Status(base.State.EXITED, exit_code=code, handle=handle)
        return base.Status(base.State.LOST, handle=handle,
                           message="its wrapper process was killed while corral was not "
                                   "watching, so its exit code is unknown")

    def _process(self, handle: base.Handle) -> psutil.Process | None:
        proc = self._ps.get(handle.launch_id)
        if proc is None:
            if not handle.start_time or _start_ticks(handle.pid) != handle.start_time:
                return None
            try:
                proc = psutil.Process(handle.pid)
            except psutil.Error:
                return None
            self._ps[handle.launch_id] = proc
        return proc


def _spawn(spec: base.LaunchSpec) -> subprocess.Popen[bytes]:
    _mkdir(spec.control_dir)
    _mkdir(os.path.dirname(spec.log_path))
    uid = gid = None
    groups: list[int] | None = None
    if spec.run_as is not None:
        # The wrapper, running as the task's user, writes its claim file.
        os.chown(spec.control_dir, *spec.run_as)
        (uid, gid), groups = spec.run_as, []
    log_fd = os.open(spec.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        return subprocess.Popen(
            ["/bin/sh", "-c", WRAPPER, control_prefix(spec), "-c" if spec.shell else "--",
             *spec.argv], cwd=spec.cwd,
            env={**spec.env, LAUNCH_ENV: spec.launch_id}, stdin=subprocess.DEVNULL,
            stdout=log_fd, stderr=subprocess.STDOUT, start_new_session=True, close_fds=True,
            user=uid, group=gid, extra_groups=groups,
        )
    finally:
        os.close(log_fd)


def _mkdir(path: str) -> None:
    """os.makedirs(path, exist_ok=True) in one system call when the parent exists (as it
    does for every task: os.makedirs looks at each parent first)."""
    try:
        os.mkdir(path)
    except FileExistsError:
        pass
    except FileNotFoundError:
        os.makedirs(path, exist_ok=True)


def control_prefix(spec: base.LaunchSpec) -> str:
    return f"{spec.control_dir}/{spec.task}.{spec.launch_id}"


def _read_exit(handle: base.Handle) -> int | None:
    """The exit code the wrapper recorded: the claim file's second line (or, from a wrapper
    of an earlier version, the `.exit` file); None if it recorded none."""
    for path, line in ((handle.prefix + ".claim", 1), (handle.prefix + ".exit", 0)):
        try:
            with open(path) as fh:
                lines = fh.read().split()
        except FileNotFoundError:
            continue
        if len(lines) > line and lines[line].lstrip("-").isdigit():
            return int(lines[line])
    return None


def _read_claim(path: str) -> str:
    # The wrapper creates the file and writes its pid in two steps; give it a moment.
    for _ in range(50):
        with open(path) as fh:
            content = fh.read().strip()
        if content:
            return content
        time.sleep(0.01)
    return ""


def _start_ticks(pid: int) -> float | None:
    """The process's start time in clock ticks since boot, or None if it is gone/a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The command name may hold spaces and parentheses: split after the last ')'.
    fields = raw[raw.rindex(b")") + 2:].split()
    if fields[0] in (b"Z", b"X"):
        return None
    return float(fields[19])


def _runs_prefix(pid: int, prefix: str) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return prefix.encode() in fh.read().split(b"\0")
    except OSError:
        return False


def _kill_group(handle: base.Handle, sig: signal.Signals) -> None:
    """Signal the task's process group, unless its id now belongs to someone else's group.

    A group id cannot be reused while any member lives; it can once the group is empty,
    so a live leader with the same pid but another start time is not ours.
    """
    start = _start_ticks(handle.pid)
    if start is not None and handle.start_time and start != handle.start_time:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(handle.pid, sig)


def _kill_leftovers(handle: base.Handle) -> None:
    """SIGKILL the task's group and every process that carries its launch marker.

    The marker (an environment variable every process of the task inherits) finds those
    that left the group or were re-parented away by daemonising; only a process that
    replaced its own environment escapes it.
    """
    _kill_group(handle, signal.SIGKILL)
    marker = f"{LAUNCH_ENV}={handle.launch_id}".encode()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as fh:
                env = fh.read()
        except OSError:
            continue
        if marker in env.split(b"\0"):
            with contextlib.suppress(OSError):
                os.kill(int(entry.name), signal.SIGKILL)


def _exit_code(rc: int) -> int:
    # Popen reports death by signal N as -N; shells and ModelArts say 128 + N.
    return 128 - rc if rc < 0 else rc


def _gpu_ids_of(handle: base.Handle) -> list[int]:
    try:
        with open(f"/proc/{handle.pid}/environ", "rb") as fh:
            env = fh.read().split(b"\0")
    except OSError:
        return []
    for item in env:
        if item.startswith(b"CUDA_VISIBLE_DEVICES="):
            raw = item.split(b"=", 1)[1].decode()
            return [int(x) for x in raw.split(",") if x.strip().isdigit()]
    return []


class _ExitWatcher(threading.Thread):
    """Wakes the scheduler the moment a watched process ends (pidfd + poll)."""

    def __init__(self) -> None:
        super().__init__(name="corral-exit-watcher", daemon=True)
        self.wake: Callable[[], None] = lambda: None
        self._poll = select.poll()
        self._r, self._w = os.pipe()
        os.set_blocking(self._r, False)
        self._poll.register(self._r, select.POLLIN)
        self._pending: list[int] = []
        self._lock = threading.Lock()
        self._stopped = False
        self.supported = hasattr(os, "pidfd_open")

    def watch(self, pid: int) -> None:
        if not self.supported:
            return
        try:
            fd = os.pidfd_open(pid)
        except OSError:
            self.wake()  # already gone: let the scheduler look now
            return
        with self._lock:
            self._pending.append(fd)
        os.write(self._w, b"x")

    def stop(self) -> None:
        self._stopped = True
        with contextlib.suppress(OSError):
            os.write(self._w, b"x")

    def run(self) -> None:
        while not self._stopped:
            for fd, _ev in self._poll.poll():
                if fd == self._r:
                    self._take_pending()
                    continue
                self._poll.unregister(fd)
                os.close(fd)
                self.wake()

    def _take_pending(self) -> None:
        with contextlib.suppress(BlockingIOError):
            os.read(self._r, 4096)
        with self._lock:
            fds, self._pending = self._pending, []
        for fd in fds:
            self._poll.register(fd, select.POLLIN)


def detect_node(*, cpus: int | None = None, memory_gb: int | None = None) -> resources.Node:
    """This machine's capacity, honouring CPU affinity and cgroup limits."""
    n_cpu = cpus or _cgroup_cpus() or len(os.sched_getaffinity(0))
    mem_mb = memory_gb * 1024 if memory_gb else _cgroup_memory_mb() or (
        psutil.virtual_memory().total // 2**20)
    import platform

    return resources.Node(name="local", cpu=n_cpu, memory_mb=int(mem_mb),
                          gpus=tuple(gpus.detect()), arch=platform.machine() or "x86_64")


def _cgroup_cpus() -> int | None:
    try:
        with open("/sys/fs/cgroup/cpu.max") as fh:
            quota, period = fh.read().split()
    except (OSError, ValueError):
        return None
    if quota == "max":
        return None
    return max(1, int(int(quota) / int(period)))


def _cgroup_memory_mb() -> int | None:
    try:
        with open("/sys/fs/cgroup/memory.max") as fh:
            raw = fh.read().strip()
    except OSError:
        return None
    if raw == "max" or not raw.isdigit():
        return None
    total = psutil.virtual_memory().total
    return min(int(raw), total) // 2**20
