"""What a local task uses: CPU, memory and GPUs, for `corral metrics` and the console.

A task with a cgroup is counted by its cgroup, exactly: every process it started, however
it left the task's tree, and memory as its limit sees it. One without is counted as the
tree of processes under its own (what left the tree is missed).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable

import psutil

from corral.executors import base, gpus
from corral.executors.local import cgroups, processes
from corral.oskit import procs


class Usage:
    """Samples tasks; the CPU percentage is over the time since the last sample."""

    def __init__(self) -> None:
        self._ps: dict[str, psutil.Process] = {}
        #: by launch id: (when, CPU seconds used by then)
        self._cpu_prev: dict[str, tuple[float, float]] = {}

    def of_group(self, handle: base.Handle, group: cgroups.Group) -> base.Sample | None:
        pids = group.pids()
        if not pids:
            return None
        cpu_ns = group.cpu_ns()
        memory = group.memory_bytes()
        if cpu_ns is None or memory is None:  # a hierarchy it has not joined
            cpu, rss = self._sum(_processes(pids))
            cpu_ns = int(cpu * 1e9) if cpu_ns is None else cpu_ns
            memory = rss if memory is None else memory
        return self._sample(handle, cpu_ns / 1e9, memory, pids)

    def of_tree(self, handle: base.Handle) -> base.Sample | None:
        proc = self._process(handle)
        if proc is None:
            return None
        try:
            tree = [proc, *proc.children(recursive=True)]
        except psutil.Error:
            return None
        cpu, rss = self._sum(tree)
        return self._sample(handle, cpu, rss, [p.pid for p in tree])

    def forget(self, launch_id: str) -> None:
        self._ps.pop(launch_id, None)
        self._cpu_prev.pop(launch_id, None)

    def _sample(self, handle: base.Handle, cpu_total: float, rss: int,
                pids: list[int]) -> base.Sample:
        now = time.time()
        prev = self._cpu_prev.get(handle.launch_id)
        if prev is None:
            # First look at this task: its average since it started.
            proc = self._process(handle)
            if proc is not None:
                with contextlib.suppress(psutil.Error):
                    prev = (proc.create_time(), 0.0)
        self._cpu_prev[handle.launch_id] = (now, cpu_total)
        cpu_pct = 0.0
        if prev and now > prev[0]:
            cpu_pct = max(0.0, (cpu_total - prev[1]) / (now - prev[0]) * 100.0)
        gpu_util, gpu_mem = gpus.usage(pids, processes.gpu_ids(handle))
        return base.Sample(cpu_percent=cpu_pct, rss_mb=rss / 2**20, gpu_util=gpu_util,
                           gpu_mem_mb=gpu_mem)

    @staticmethod
    def _sum(procs: Iterable[psutil.Process]) -> tuple[float, int]:
        """CPU seconds and resident bytes of processes, those that vanished meanwhile left
        out."""
        cpu, rss = 0.0, 0
        for p in procs:
            with contextlib.suppress(psutil.Error):
                t = p.cpu_times()
                cpu += t.user + t.system
                rss += p.memory_info().rss
        return cpu, rss

    def _process(self, handle: base.Handle) -> psutil.Process | None:
        proc = self._ps.get(handle.launch_id)
        if proc is None:
            if not handle.start_time or procs.start_ticks(handle.pid) != handle.start_time:
                return None
            try:
                proc = psutil.Process(handle.pid)
            except psutil.Error:
                return None
            self._ps[handle.launch_id] = proc
        return proc


def _processes(pids: list[int]) -> list[psutil.Process]:
    found = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            found.append(psutil.Process(pid))
    return found
