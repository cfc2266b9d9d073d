"""Every process a local task starts is held: killed when the task is stopped or ends,
whatever it did to get away (a new session, a cleared environment, a double fork, another
name), counted in the task's use, and kept to the task's memory. With a cgroup per task
where the machine has them (v2 and v1 are each tried), and by the task's keeper, a child
subreaper, with cgroups off."""

from __future__ import annotations

import dataclasses
import os
import pathlib
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import psutil
import pytest

from corral.domain import errors, resources
from corral.executors import base
from corral.executors.local import cgroups, claims, processes, tasks
from tests import factories
from tests.integration import local_rig

MODES = ["v2", "v1", "off"]
CGROUPS = ["v2", "v1"]
#: a command that starts `sleep 1000` out of the task's reach, its pid written to
#: $ROOT/escaped
ESCAPES = {
    "session and environment": 'setsid env -i sleep 1000 & echo $! > "$ROOT/escaped"',
    "session": 'setsid sleep 1000 & echo $! > "$ROOT/escaped"',
    # the subshell that forked it exits at once: it is re-parented, with another name
    "double fork and name": '( setsid env -i "$ROOT/dozer" 1000 & echo $! > "$ROOT/escaped" )',
}
WAIT_FOR_GO = 'while [ ! -e "$ROOT/go" ]; do sleep 0.05; done'


@pytest.fixture
def rig(tmp_path: pathlib.Path) -> Iterator[local_rig.Rig]:
    shutil.copy(shutil.which("sleep") or "/bin/sleep", tmp_path / "dozer")
    with local_rig.rigged(tmp_path) as r:
        yield r


def executor(rig: local_rig.Rig, mode: str, **options: Any) -> tasks.LocalExecutor:
    try:
        ex = rig.executor(cgroups_mode=mode, **options)
    except errors.CorralError as exc:
        pytest.skip(f"no cgroup {mode} to use here (needs root and a writable hierarchy): "
                    f"{exc}")
    return ex


def shell(rig: local_rig.Rig, script: str, **fields: Any) -> base.LaunchSpec:
    """A launch of a shell command line (followed by its arguments: `:` takes them)."""
    return dataclasses.replace(rig.spec("", **fields), argv=(f"{script}; :",), shell=True)


def escaped(rig: local_rig.Rig, handle: base.Handle) -> int:
    """The pid of what the task started to get away, once it runs its program."""
    path = rig.root / "escaped"
    rig.pid_files.append(path)

    def running() -> int | None:
        text = path.read_text().strip() if path.exists() else ""
        if not text:
            return None
        try:
            args = psutil.Process(int(text)).cmdline()
        except psutil.Error:
            return None
        done = args[:1] and os.path.basename(args[0]) in ("sleep", "dozer")  # exec'd
        return int(text) if done else None

    pid: int = factories.wait_for(running, 10, "the escape to run")
    assert os.getsid(pid) != os.getsid(handle.pid)  # it left the task's session
    return pid


@pytest.mark.parametrize("end", ["stopped", "ended"])
@pytest.mark.parametrize("how", sorted(ESCAPES))
@pytest.mark.parametrize("mode", MODES)
def test_nothing_a_task_started_outlives_it(rig: local_rig.Rig, mode: str, how: str,
                                            end: str) -> None:
    ex = executor(rig, mode)
    handle = rig.launch(ex, shell(rig, f"{ESCAPES[how]}; {WAIT_FOR_GO}"))
    pid = escaped(rig, handle)
    if "environment" in how:
        assert pid not in processes.marked(handle.launch_id)  # no marker finds it
    if "fork" in how:
        assert pid not in [p.pid for p in psutil.Process(handle.pid).children(recursive=True)]

    if end == "stopped":
        ex.cancel(handle, force=False)
        ex.cancel(handle, force=True)  # the grace period is over
    else:
        (rig.root / "go").touch()
    status = local_rig.wait_status(ex, handle)

    assert status.state is base.State.EXITED
    assert status.exit_code == (0 if end == "ended" else 128 + signal.SIGKILL)
    factories.wait_for(lambda: not factories.alive(pid), 5, f"{pid} to be killed")


@pytest.mark.parametrize("mode", CGROUPS)
def test_a_new_server_kills_what_a_task_left_when_its_keeper_is_gone(
        rig: local_rig.Rig, mode: str) -> None:
    """The server, the launcher and the keeper all killed: the task's cgroup, named in its
    claim, still holds everything it started."""
    ex = executor(rig, mode)
    handle = rig.launch(ex, shell(rig, f"{ESCAPES['session and environment']}; sleep 1000"))
    pid = escaped(rig, handle)
    group = claims.read(handle.prefix + ".claim").group(handle.launch_id)
    assert group is not None and set(group.pids()) >= {handle.pid, pid}
    keeper = psutil.Process(handle.pid).ppid()
    for dying in (psutil.Process(keeper).ppid(), keeper):  # the launcher, then the keeper
        local_rig.kill_and_wait(dying)

    later = rig.executor(cgroups_mode="off")  # even a server that no longer makes cgroups
    assert later.adopt(handle).state is base.State.RUNNING
    later.cancel(handle, force=True)
    status = local_rig.wait_status(later, handle)

    assert status.state is base.State.LOST  # no one was left to record its exit code
    factories.wait_for(lambda: not factories.alive(pid), 5, f"{pid} to be killed")
    assert not any(os.path.exists(d) for d in group.dirs)  # and its cgroup is gone


def test_a_claim_cannot_point_the_server_at_another_cgroup(rig: local_rig.Rig) -> None:
    """A claim file sits in a folder the task's user may write: what it names is used only
    when it is this launch's cgroup."""
    mount = next(iter(cgroups.mounts()), None)
    if mount is None:
        pytest.skip("no cgroup file system is mounted here")
    own = f"{mount.point}/corral/{'a' * 16}"
    claim = claims.Claim.parse(f'L 1 1\nC {{"version": 1, "dirs": ["{own}"]}}\n2\n')

    assert claim.group("a" * 16) == cgroups.Group(1, (own,))
    assert claim.group("b" * 16) is None  # another launch's
    assert claims.Claim.parse('C {"version": 1, "dirs": ["/sys/fs/cgroup/memory"]}\n'
                              ).group("memory") is None  # not a task's
    assert claims.Claim.parse('C {"version": 1, "dirs": ["/tmp/corral/x"]}\n'
                              ).group("x") is None  # not in a cgroup file system


@pytest.mark.parametrize("mode", CGROUPS)
def test_a_task_over_its_memory_is_killed_and_says_so(rig: local_rig.Rig, mode: str) -> None:
    ex = executor(rig, mode)
    if "memory limited" not in ex.containment():
        pytest.skip(f"the memory controller is not delegated to cgroup {mode} here")
    spec = rig.spec("big = b'x' * (256 << 20); print('survived')",
                    demand=resources.Resources(cpu=1, memory_mb=64))

    status = local_rig.wait_status(ex, rig.launch(ex, spec))

    assert (status.state, status.exit_code) == (base.State.EXITED, 128 + signal.SIGKILL)
    assert status.out_of_memory
    assert "64 MB" in status.message
    assert "survived" not in pathlib.Path(spec.log_path).read_text()


@pytest.mark.parametrize("mode", CGROUPS)
def test_a_task_within_its_memory_runs_to_its_end(rig: local_rig.Rig, mode: str) -> None:
    ex = executor(rig, mode)
    spec = rig.spec("small = b'x' * (16 << 20); print('done')",
                    demand=resources.Resources(cpu=1, memory_mb=256))

    status = local_rig.wait_status(ex, rig.launch(ex, spec))

    assert (status.state, status.exit_code, status.out_of_memory) == (
        base.State.EXITED, 0, False)
    assert "done" in pathlib.Path(spec.log_path).read_text()


@pytest.mark.parametrize("mode", CGROUPS)
def test_a_task_is_sampled_with_what_left_it(rig: local_rig.Rig, mode: str) -> None:
    """What a task started counts in its use even after leaving its tree."""
    ex = executor(rig, mode)
    hog = f"{sys.executable} -c \"b = b'x' * (200 << 20); open('$ROOT/escaped', 'w').write(" \
          "'ready'); import time; time.sleep(1000)\""
    handle = rig.launch(ex, shell(rig, f"( setsid {hog} & ); {WAIT_FOR_GO}"))
    factories.wait_for((rig.root / "escaped").exists, 10, "the hog to hold its memory")

    sample = ex.sample(handle)

    assert sample is not None
    assert sample.rss_mb >= 190
    assert len(psutil.Process(handle.pid).children(recursive=True)) <= 1  # (a sleep 0.05)
    (rig.root / "go").touch()
    local_rig.wait_status(ex, handle)


@pytest.mark.parametrize("mode", CGROUPS)
def test_a_task_is_in_its_cgroup_from_its_start_and_what_cannot_start_says_why(
        rig: local_rig.Rig, mode: str) -> None:
    ex = executor(rig, mode)
    spec = rig.spec("print(open('/proc/self/cgroup').read())")  # its first instruction
    assert local_rig.wait_status(ex, rig.launch(ex, spec)).exit_code == 0
    log = pathlib.Path(spec.log_path).read_text()
    mine = [line for line in log.splitlines() if line.endswith(f"/corral/{spec.launch_id}")]
    assert mine and (mode == "v1" or mine[0].startswith("0::"))

    missing = dataclasses.replace(rig.spec(""), argv=(str(rig.root / "no-such-program"),))
    with pytest.raises(errors.LaunchError, match=r"No such file.*no-such-program"):
        ex.launch(missing)
    nowhere = dataclasses.replace(rig.spec("print(1)"), cwd=str(rig.root / "no-such-folder"))
    with pytest.raises(errors.LaunchError, match=r"No such file.*no-such-folder"):
        ex.launch(nowhere)
    for refused in (missing, nowhere):  # never started: a new server starts them anew
        assert rig.executor().recover(refused).state is base.State.NOT_STARTED


SPAWN_IN_CGROUP = """
import os, sys, threading
from corral.executors.local import cgroups, clone
layout, _ = cgroups.detect("v2")
name, out_path, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
group = layout.group(name)
group.create(0)
mine = cgroups.own_paths()[""]
stop = False
def spin():
    while not stop:
        pass
for _ in range(threads):
    threading.Thread(target=spin, daemon=True).start()
out = os.open(out_path, os.O_WRONLY | os.O_CREAT)
try:
    child = clone.spawn(clone.Start(["cat", "/proc/self/cgroup"], "/", dict(os.environ), out),
                        group.dirs[0])
    if child is None:
        sys.exit("not started")
    assert os.waitpid(child.pid, 0)[1] == 0
    try:
        clone.spawn(clone.Start(["no-such-program"], "/", dict(os.environ), out),
                    group.dirs[0])
        sys.exit("a missing program started")
    except FileNotFoundError as exc:
        assert "no-such-program" in str(exc)
finally:
    stop = True
    os.close(out)
    group.remove()
assert cgroups.own_paths()[""] == mine, "the maker entered the task's cgroup"
print("spawned")
"""


def _spawn_in_cgroup(tmp_path: pathlib.Path, threads: int) -> subprocess.CompletedProcess[str]:
    layout, why = cgroups.detect("v2")
    if layout is None:
        pytest.skip(f"no cgroup v2 to use here: {why}")
    return subprocess.run([sys.executable, "-c", SPAWN_IN_CGROUP, f"clone-{os.getpid()}",
                           str(tmp_path / "out"), str(threads)],
                          capture_output=True, text=True, timeout=60)


def test_a_v2_child_is_made_in_its_cgroup_and_its_maker_never_enters_it(
        tmp_path: pathlib.Path) -> None:
    """(From a process of its own: a keeper is single-threaded, and pytest's is not.)"""
    done = _spawn_in_cgroup(tmp_path, threads=0)
    if "not started" in done.stderr:
        pytest.skip("this kernel does not start a child in a cgroup (clone3)")
    assert done.returncode == 0 and "spawned" in done.stdout, done.stderr
    [v2] = [line for line in (tmp_path / "out").read_text().splitlines()
            if line.startswith("0::")]
    assert v2.endswith(f"/{cgroups.PARENT}/clone-{os.getpid()}")


def test_a_process_with_other_threads_makes_no_v2_child_and_never_hangs(
        tmp_path: pathlib.Path) -> None:
    """A bare clone3 from a process with other threads could leave the child waiting for
    a lock one of them held (malloc's): spawn declines (None), and the caller starts the
    task the other way. It hung before, with the child never reaching its exec."""
    done = _spawn_in_cgroup(tmp_path, threads=2)
    assert "not started" in done.stderr, (done.stdout, done.stderr)
