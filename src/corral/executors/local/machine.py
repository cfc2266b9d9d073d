"""This machine's capacity, as the local executor offers it: CPUs and memory, GPUs.

What a container or a service manager allows counts, not what the hardware has: the CPUs
the process may run on, and the CPU quota and memory limit of its cgroup. Both cgroup
versions are read: v2's unified files where they are (`cpu.max`, `memory.max`), else the
v1 controllers' (`cpu/cpu.cfs_quota_us` over `cpu/cpu.cfs_period_us`,
`memory/memory.limit_in_bytes`), as hosts that still mount v1 controllers have them.
"""

from __future__ import annotations

import os
import platform

import psutil

from corral.domain import resources
from corral.executors import base, gpus

#: where the cgroup file system is mounted
CGROUP_ROOT = "/sys/fs/cgroup"
#: cgroup v1 has no word for "no limit": its memory limit is then the largest page-aligned
#: 64-bit number (2**63 minus a page); anything this large is no limit
V1_UNLIMITED = 2**62
#: where a v1 cpu controller may be mounted (`cpu` is usually a link to the joint one)
V1_CPU_DIRS = ("cpu", "cpu,cpuacct")


def detect_node(*, cpus: int | None = None, memory_gb: int | None = None,
                cgroup_root: str = CGROUP_ROOT) -> resources.Node:
    """This machine's capacity, honouring CPU affinity and cgroup limits; `cpus` and
    `memory_gb` (the settings') win over what is found."""
    n_cpu = cpus or cpu_limit(cgroup_root) or len(os.sched_getaffinity(0))
    mem_mb = memory_gb * 1024 if memory_gb else memory_limit_mb(cgroup_root) or (
        psutil.virtual_memory().total // 2**20)
    return resources.Node(name="local", cpu=n_cpu, memory_mb=int(mem_mb),
                          gpus=tuple(gpus.detect()), arch=platform.machine() or "x86_64")


def usage(name: str) -> base.NodeUsage:
    """What this machine uses now, whoever uses it. CPU is over the time since the last
    call (the first call's is 0)."""
    mem = psutil.virtual_memory()
    gpu = gpus.node_usage()
    return base.NodeUsage(node=name, cpu_percent=psutil.cpu_percent(interval=None),
                          mem_mb=(mem.total - mem.available) / 2**20,
                          gpu_util=gpu[0] if gpu else None, gpu_mem_mb=gpu[1] if gpu else None)


def cpu_limit(cgroup_root: str = CGROUP_ROOT) -> int | None:
    """The whole CPUs the cgroup's CPU quota allows (at least one), or None without one."""
    v2 = _read(cgroup_root, "cpu.max")
    if v2 is not None:
        quota, _, period = v2.partition(" ")
        return _whole_cpus(quota, period)
    for top in V1_CPU_DIRS:
        v1_quota = _read(cgroup_root, f"{top}/cpu.cfs_quota_us")
        v1_period = _read(cgroup_root, f"{top}/cpu.cfs_period_us")
        if v1_quota is not None and v1_period is not None:
            return _whole_cpus(v1_quota, v1_period)
    return None


def memory_limit_mb(cgroup_root: str = CGROUP_ROOT) -> int | None:
    """The cgroup's memory limit in MiB (at most the machine's memory), or None."""
    raw = _read(cgroup_root, "memory.max")
    if raw is None:
        raw = _read(cgroup_root, "memory/memory.limit_in_bytes")
    if raw is None or not raw.isdigit() or int(raw) >= V1_UNLIMITED:  # v2 says "max"
        return None
    return min(int(raw), psutil.virtual_memory().total) // 2**20


def _whole_cpus(quota: str, period: str) -> int | None:
    # No quota: "max" (v2) or -1 (v1).
    if not quota.isdigit() or not period.strip().isdigit() or int(period) <= 0:
        return None
    return max(1, int(quota) // int(period))


def _read(cgroup_root: str, name: str) -> str | None:
    try:
        with open(os.path.join(cgroup_root, name)) as fh:
            return fh.read().strip()
    except OSError:
        return None
