"""The local node's capacity under cgroup limits, v2 and v1, read from a fake /sys tree."""

from __future__ import annotations

import pathlib

import psutil
import pytest

from corral.executors.local import machine

MiB = 2**20


def cgroup_files(root: pathlib.Path, files: dict[str, str]) -> str:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")
    return str(root)


@pytest.mark.parametrize(("files", "cpus", "memory_mb"), [
    # cgroup v2: the unified files
    ({"cpu.max": "200000 100000", "memory.max": str(512 * MiB)}, 2, 512),
    ({"cpu.max": "150000 100000", "memory.max": "max"}, 1, None),
    ({"cpu.max": "max 100000"}, None, None),
    # cgroup v1: a controller each; its "no limit" is -1 for CPU, a huge number for memory
    ({"cpu/cpu.cfs_quota_us": "300000", "cpu/cpu.cfs_period_us": "100000",
      "memory/memory.limit_in_bytes": str(768 * MiB)}, 3, 768),
    ({"cpu,cpuacct/cpu.cfs_quota_us": "50000", "cpu,cpuacct/cpu.cfs_period_us": "100000"},
     1, None),
    ({"cpu/cpu.cfs_quota_us": "-1", "cpu/cpu.cfs_period_us": "100000",
      "memory/memory.limit_in_bytes": "9223372036854771712"}, None, None),
    # both: v2's files are the ones in force
    ({"cpu.max": "100000 100000", "cpu/cpu.cfs_quota_us": "400000",
      "cpu/cpu.cfs_period_us": "100000", "memory.max": str(256 * MiB),
      "memory/memory.limit_in_bytes": str(1024 * MiB)}, 1, 256),
    ({}, None, None),
])
def test_the_cgroups_limits_are_found_whichever_version_has_them(
        tmp_path: pathlib.Path, files: dict[str, str], cpus: int | None,
        memory_mb: int | None) -> None:
    root = cgroup_files(tmp_path, files)

    assert machine.cpu_limit(root) == cpus
    assert machine.memory_limit_mb(root) == memory_mb


def test_a_node_limited_by_cgroup_v1_offers_what_its_cgroup_allows(
        tmp_path: pathlib.Path) -> None:
    root = cgroup_files(tmp_path, {"cpu/cpu.cfs_quota_us": "100000",
                                   "cpu/cpu.cfs_period_us": "100000",
                                   "memory/memory.limit_in_bytes": str(300 * MiB)})

    node = machine.detect_node(cgroup_root=root)

    assert (node.cpu, node.memory_mb) == (1, 300)


def test_without_limits_a_node_offers_the_machine(tmp_path: pathlib.Path) -> None:
    node = machine.detect_node(cgroup_root=str(tmp_path))

    assert node.memory_mb == psutil.virtual_memory().total // MiB
    assert node.cpu >= 1
