"""An adopted task whose keeper records its exit code and exits while the server reads its
claim: its end is read, never taken for a lost task (real processes; the keeper is held
stopped, and let go at the moment each test names, so the window is hit every time)."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator

import pytest

from corral.executors import base
from corral.executors.local import claims, tasks
from corral.oskit import procs
from tests import factories
from tests.integration import local_rig

GATED = """
    import os, pathlib, sys
    import time
    root = pathlib.Path(os.environ["ROOT"])
    (root / "ready").write_text(str(os.getpid()))
    while not (root / "go").exists():
        time.sleep(0.02)
    sys.exit(3)
"""


@pytest.fixture
def rig(tmp_path: pathlib.Path) -> Iterator[local_rig.Rig]:
    with local_rig.rigged(tmp_path) as r:
        yield r


def ended_with_keeper_stopped(rig: local_rig.Rig) -> tuple[base.Handle, Callable[[], None]]:
    """A task that has ended (exit code 3) while its keeper is stopped, so that its claim
    holds no code yet; and what lets the keeper go and waits until it has exited."""
    handle = rig.launch(rig.executor(), rig.spec(GATED))
    factories.wait_for((rig.root / "ready").exists, what="the task to start")
    keeper = int(pathlib.Path(handle.prefix + ".claim").read_text().split()[1])
    os.kill(keeper, signal.SIGSTOP)
    (rig.root / "go").touch()
    # A zombie of its stopped keeper: no longer the task's process as the server sees it.
    factories.wait_for(lambda: procs.start_ticks(handle.pid) is None, what="the task")
    assert claims.read(handle.prefix + ".claim").code is None

    def let_go() -> None:
        os.kill(keeper, signal.SIGCONT)
        factories.wait_for(lambda: not factories.alive(keeper), what="the keeper to exit")

    return handle, let_go


def test_a_keeper_that_records_the_code_right_after_a_read_of_the_claim(
        rig: local_rig.Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    """The keeper writes the code and exits between the server's read of the claim and its
    look at whether the keeper still lives."""
    handle, let_go = ended_with_keeper_stopped(rig)
    load = claims._load
    loads = []

    def load_then_keeper_ends(path: str) -> claims.Claim:
        claim = load(path)
        loads.append(claim)
        if len(loads) == 1:
            let_go()
        return claim

    monkeypatch.setattr(claims, "_load", load_then_keeper_ends)

    status = rig.executor().adopt(handle)

    assert loads[0].code is None  # the window was hit: the first read had no code
    assert (status.state, status.exit_code) == (base.State.EXITED, 3)


def test_a_read_of_the_claim_has_what_its_keeper_wrote_before_it_was_seen_gone(
        rig: local_rig.Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same window for every reader of a claim (a recovering server's too): a claim
    whose keeper is found gone is the one read after it was found gone."""
    handle, let_go = ended_with_keeper_stopped(rig)
    load = claims._load
    loads = []

    def load_then_keeper_ends(path: str) -> claims.Claim:
        loads.append(load(path))
        if len(loads) == 1:
            let_go()
        return loads[-1]

    monkeypatch.setattr(claims, "_load", load_then_keeper_ends)

    claim = claims.read(handle.prefix + ".claim", until_code=True)

    assert loads[0].code is None
    assert (claim.pid, claim.code) == (handle.pid, 3)


def test_a_keeper_that_records_the_code_after_the_wait_for_it_ran_out(
        rig: local_rig.Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    """The keeper takes longer than the server waits for the code (its drain and the kill
    of its cgroup), then writes it and exits before the server looks at whether it lives."""
    handle, let_go = ended_with_keeper_stopped(rig)
    read = claims.read
    reads = []

    def read_then_keeper_ends(path: str, *, until_code: bool = False) -> claims.Claim:
        claim = read(path, until_code=until_code)
        reads.append(claim)
        if len(reads) == 1:
            let_go()
        return claim

    monkeypatch.setattr(claims, "read", read_then_keeper_ends)

    status = rig.executor().adopt(handle)

    assert reads[0].code is None  # the wait ran out with no code
    assert (status.state, status.exit_code) == (base.State.EXITED, 3)


def test_a_keeper_killed_before_recording_the_code_is_still_lost(rig: local_rig.Rig) -> None:
    handle, _let_go = ended_with_keeper_stopped(rig)
    keeper = int(pathlib.Path(handle.prefix + ".claim").read_text().split()[1])
    local_rig.kill_and_wait(keeper)

    status = rig.executor().adopt(handle)

    assert status.state is base.State.LOST
    assert "exit code is unknown" in status.message


#: a keeper's part up to the task's start, played by hand: it claims the launch and then
#: waits (a slow start) before it records the task's pid and starts it
SLOW_KEEPER = """
import os, pathlib, subprocess, sys, time
from corral.executors.local import keeper
claim, root, marker = sys.argv[1:]
fd = os.open(claim, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
os.write(fd, f"L {os.getpid()} {keeper.start_ticks('self')}\\n".encode())
while not os.path.exists(os.path.join(root, "go")):
    time.sleep(0.02)
task = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                        env={**os.environ, "CORRAL_LAUNCH_ID": marker})
os.write(fd, f"{task.pid}\\n".encode())
pathlib.Path(root, "task.pid").write_text(str(task.pid))
"""


def test_a_launch_whose_keeper_is_still_starting_it_is_never_started_once_settled(
        rig: local_rig.Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    """A restarted server settles a launch whose keeper lives but has not recorded the
    task's pid yet: whatever it decides, the keeper must not start the task after it."""
    monkeypatch.setattr(tasks, "KEEPER_START_S", 1.0)
    spec = rig.spec("")
    claim = pathlib.Path(claims.control_prefix(spec) + ".claim")
    slow = subprocess.Popen([sys.executable, "-c", SLOW_KEEPER, str(claim), str(rig.root),
                             spec.launch_id])
    rig.pid_files.append(rig.root / "task.pid")
    try:
        factories.wait_for(lambda: claim.exists() and claim.read_text().startswith("L "),
                           what="the keeper to claim the launch")

        status = rig.executor().recover(spec)

        assert status.state is base.State.LOST
        assert exit_status(slow) == -signal.SIGKILL, "its keeper may still start it"
    finally:
        (rig.root / "go").touch()
        slow.wait(30)


#: a keeper played by hand that has started its task (which exits 0 once ROOT/go exists) but
#: records its pid only once ROOT/record exists (a loaded machine), then its exit code
STARTED_KEEPER = """
import os, pathlib, subprocess, sys, time
from corral.executors.local import keeper
claim, root, marker = sys.argv[1:]
fd = os.open(claim, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
os.write(fd, f"L {os.getpid()} {keeper.start_ticks('self')}\\n".encode())
task = subprocess.Popen(
    [sys.executable, "-c", "import os, time\\n"
     f"while not os.path.exists({root!r} + '/go'): time.sleep(0.02)"],
    env={**os.environ, "CORRAL_LAUNCH_ID": marker}, start_new_session=True)
pathlib.Path(root, "task.pid").write_text(str(task.pid))
while not os.path.exists(os.path.join(root, "record")):
    time.sleep(0.02)
os.write(fd, f"{task.pid}\\n".encode())
os.write(fd, f"{task.wait()}\\n".encode())
"""


def test_a_keeper_that_records_the_pid_after_the_first_read_keeps_its_task(
        rig: local_rig.Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    """The keeper has started the task and records its pid only after the recovering
    server's first read of the claim (its half-second wait) ran out: the server waits for
    it, adopts the task with its keeper, and reads its exit code when it ends."""
    spec = rig.spec("")
    claim = pathlib.Path(claims.control_prefix(spec) + ".claim")
    slow = subprocess.Popen([sys.executable, "-c", STARTED_KEEPER, str(claim),
                             str(rig.root), spec.launch_id])
    rig.pid_files.append(rig.root / "task.pid")
    read = claims.read
    reads = []

    def read_then_record(path: str, *, until_code: bool = False) -> claims.Claim:
        found = read(path, until_code=until_code)
        reads.append(found)
        (rig.root / "record").touch()
        return found

    try:
        factories.wait_for((rig.root / "task.pid").exists, what="the task to start")
        monkeypatch.setattr(claims, "read", read_then_record)

        status = rig.executor().recover(spec)
        monkeypatch.undo()

        assert reads[0].pid is None  # the window was hit: the first read had no pid
        assert status.state is base.State.RUNNING and status.handle is not None
        assert status.handle.pid == int((rig.root / "task.pid").read_text())
        (rig.root / "go").touch()
        end = local_rig.wait_status(rig.executors[0], status.handle)
        assert (end.state, end.exit_code) == (base.State.EXITED, 0)
    finally:
        (rig.root / "go").touch()
        (rig.root / "record").touch()
        slow.wait(30)


#: a keeper played by hand that has forked its task, which has not exec'd yet (so it
#: carries no launch marker), and never records its pid
FORKED_KEEPER = """
import os, pathlib, sys, time
from corral.executors.local import keeper
claim, root = sys.argv[1:]
fd = os.open(claim, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
os.write(fd, f"L {os.getpid()} {keeper.start_ticks('self')}\\n".encode())
child = os.fork()
if child == 0:
    while True:
        time.sleep(1)
pathlib.Path(root, "task.pid").write_text(str(child))
while True:
    time.sleep(1)
"""


def test_a_keeper_stopped_while_starting_takes_its_forked_task_with_it(
        rig: local_rig.Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tasks, "KEEPER_START_S", 0.5)
    spec = rig.spec("")
    claim = pathlib.Path(claims.control_prefix(spec) + ".claim")
    stuck = subprocess.Popen([sys.executable, "-c", FORKED_KEEPER, str(claim),
                              str(rig.root)])
    rig.pid_files.append(rig.root / "task.pid")
    try:
        factories.wait_for((rig.root / "task.pid").exists, what="the keeper to fork")
        child = int((rig.root / "task.pid").read_text())

        status = rig.executor().recover(spec)

        assert status.state is base.State.LOST
        assert "whether it ran is unknown" in status.message
        assert exit_status(stuck) == -signal.SIGKILL
        assert gone_within_seconds(child), "the task its keeper forked still runs"
    finally:
        stuck.kill()
        stuck.wait(30)


def test_a_launch_given_up_for_no_answer_stops_the_keeper_that_claimed_it(
        rig: local_rig.Rig) -> None:
    """The launcher did not answer in time, but the launch's keeper had claimed it: the
    launch fails, and that keeper must not go on to start a task no one watches."""
    spec = rig.spec("")
    claim = pathlib.Path(claims.control_prefix(spec) + ".claim")
    slow = subprocess.Popen([sys.executable, "-c", SLOW_KEEPER, str(claim), str(rig.root),
                             spec.launch_id])
    rig.pid_files.append(rig.root / "task.pid")
    try:
        factories.wait_for(lambda: claim.exists() and claim.read_text().startswith("L "),
                           what="the keeper to claim the launch")

        failed = tasks._launch_failed(spec, OSError("the launcher did not answer"))

        assert "did not answer" in str(failed)
        assert exit_status(slow) == -signal.SIGKILL, "its keeper may still start it"
    finally:
        (rig.root / "go").touch()
        slow.wait(30)


def gone_within_seconds(pid: int) -> bool:
    """Whether the process is gone (or a zombie), seconds on at most."""
    try:
        factories.wait_for(lambda: not factories.alive(pid), 5, f"{pid} to die")
    except AssertionError:
        return False
    return True


def exit_status(proc: subprocess.Popen[bytes]) -> int | None:
    """The process's exit status, once it has exited (None: it still runs, seconds on)."""
    try:
        return proc.wait(5)
    except subprocess.TimeoutExpired:
        return None
