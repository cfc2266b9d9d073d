"""How a keeper moves itself into its task's cgroup and out again, on folders shaped like
cgroup hierarchies: on v1 its one thread (`tasks`: no global lock, no wait for an RCU grace
period at each launch), on v2 its process (`cgroup.procs`, the only move a v2 domain
cgroup takes)."""

from __future__ import annotations

import os
import pathlib

import pytest

from corral.executors.local import cgroups


def hierarchy(root: pathlib.Path, names: tuple[str, ...]) -> tuple[str, ...]:
    """A task's cgroup folder in each of `names`' hierarchies, with the move files of the
    task's cgroup and of the server's."""
    dirs = []
    for name in names:
        task = root / name / cgroups.PARENT / "launch1"
        task.mkdir(parents=True)
        for folder in (task, root / name):
            for f in ("tasks", "cgroup.procs"):
                (folder / f).write_text("")
        dirs.append(str(task))
    return tuple(dirs)


@pytest.mark.parametrize(("version", "mover"), [(1, "tasks"), (2, "cgroup.procs")])
def test_a_keeper_moves_itself_in_and_out(tmp_path: pathlib.Path, version: int,
                                         mover: str) -> None:
    names = ("memory", "cpuacct", "freezer") if version == 1 else ("unified",)
    group = cgroups.Group(version, hierarchy(tmp_path, names))
    other = "cgroup.procs" if mover == "tasks" else "tasks"
    group.join()
    for d in group.dirs:
        assert (pathlib.Path(d) / mover).read_text() == "0"
        assert (pathlib.Path(d) / other).read_text() == ""
    group.leave()
    for name in names:
        assert (tmp_path / name / mover).read_text() == "0"
        assert (tmp_path / name / other).read_text() == ""


def test_a_tasks_cgroup_goes_and_the_folder_that_holds_tasks_cgroups_stays(
        tmp_path: pathlib.Path) -> None:
    """Made by the server when it starts, the tasks' folder is never removed by a keeper:
    making and removing it with each task cost each launch and each end cgroup operations,
    and a keeper that removed it raced one making its task's cgroup there."""
    parent = tmp_path / "memory" / cgroups.PARENT
    parent.mkdir(parents=True)
    first = cgroups.Group(1, (str(parent / "launch1"),))
    second = cgroups.Group(1, (str(parent / "launch2"),))
    first.create(0)
    second.create(0)

    assert first.remove() and second.remove()
    assert parent.is_dir() and list(parent.iterdir()) == []


def test_a_tasks_cgroup_is_made_when_the_folder_that_holds_them_is_gone(
        tmp_path: pathlib.Path) -> None:
    """Removed by hand, say: made again, as the server made it."""
    group = cgroups.Group(1, (str(tmp_path / "memory" / cgroups.PARENT / "launch1"),))
    (tmp_path / "memory").mkdir()

    group.create(0)

    assert os.path.isdir(group.dirs[0])
