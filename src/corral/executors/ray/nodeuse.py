"""A reading of a Ray node's own use, whoever uses it, taken on the node as a Ray task
(the Nodes page's charts).

Standard library, psutil (which Ray depends on) and, where installed, nvidia-ml-py: the
executor ships this module to the nodes by value, as it does actor.py, so a node needs Ray
but not corral.
"""

from __future__ import annotations

import contextlib

#: seconds over which the node's CPU use is measured
CPU_WINDOW_S = 0.25


def read() -> tuple[float, float, float | None, float | None]:
    """(CPU percent of the whole node, memory MiB in use, mean GPU utilisation %, GPU
    memory MiB in use; the last two None without GPUs or NVML)."""
    import psutil

    gpu_util = gpu_mem = None
    with contextlib.suppress(Exception):  # no nvidia-ml-py, driver or GPU: no GPU figures
        import pynvml

        pynvml.nvmlInit()
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i)
                   for i in range(pynvml.nvmlDeviceGetCount())]
        if handles:
            gpu_util = sum(pynvml.nvmlDeviceGetUtilizationRates(h).gpu
                           for h in handles) / len(handles)
            gpu_mem = sum(pynvml.nvmlDeviceGetMemoryInfo(h).used for h in handles) / 2**20
    mem = psutil.virtual_memory()
    return (psutil.cpu_percent(interval=CPU_WINDOW_S), (mem.total - mem.available) / 2**20,
            gpu_util, gpu_mem)
