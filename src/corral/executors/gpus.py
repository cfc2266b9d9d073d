"""GPUs through NVML, when the machine has them and nvidia-ml-py is installed.

Everything here degrades to "no GPUs" rather than failing: a CPU-only machine is normal.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Sequence
from typing import Any

from corral.domain import resources

_lock = threading.Lock()
_nvml: Any = None
_tried = False


def _load() -> Any:
    global _nvml, _tried
    with _lock:
        if not _tried:
            _tried = True
            try:
                import pynvml

                pynvml.nvmlInit()
                _nvml = pynvml
            except Exception:  # no library, no driver, no device: all mean "no GPUs"
                _nvml = None
        return _nvml


def detect() -> list[resources.Gpu]:
    nvml = _load()
    if nvml is None:
        return []
    out = []
    for i in range(nvml.nvmlDeviceGetCount()):
        h = nvml.nvmlDeviceGetHandleByIndex(i)
        name = nvml.nvmlDeviceGetName(h)
        if isinstance(name, bytes):
            name = name.decode()
        mem = nvml.nvmlDeviceGetMemoryInfo(h).total // 2**20
        out.append(resources.Gpu(index=i, name=str(name), memory_mb=int(mem)))
    return out


def usage(pids: Sequence[int], gpu_ids: Sequence[int]) -> tuple[float, float]:
    """(mean utilisation % of the task's GPUs, GPU memory MiB used by its processes)."""
    nvml = _load()
    if nvml is None or not gpu_ids:
        return 0.0, 0.0
    util = 0.0
    mem = 0.0
    wanted = set(pids)
    for i in gpu_ids:
        with contextlib.suppress(Exception):
            h = nvml.nvmlDeviceGetHandleByIndex(i)
            util += nvml.nvmlDeviceGetUtilizationRates(h).gpu
            for p in nvml.nvmlDeviceGetComputeRunningProcesses(h):
                if p.pid in wanted and p.usedGpuMemory:
                    mem += p.usedGpuMemory / 2**20
    return util / len(gpu_ids), mem


def node_usage() -> tuple[float, float] | None:
    """(mean utilisation % of this machine's GPUs, GPU memory MiB in use on them, by
    anyone), or None without GPUs."""
    nvml = _load()
    if nvml is None:
        return None
    util = mem = 0.0
    count = 0
    with contextlib.suppress(Exception):
        for i in range(nvml.nvmlDeviceGetCount()):
            h = nvml.nvmlDeviceGetHandleByIndex(i)
            util += nvml.nvmlDeviceGetUtilizationRates(h).gpu
            mem += nvml.nvmlDeviceGetMemoryInfo(h).used / 2**20
            count += 1
    return (util / count, mem) if count else None
