"""The local executor with real processes: exits, signals, process trees, crash recovery."""

from __future__ import annotations

import dataclasses
import os
import pathlib
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import psutil
import pytest

from corral.domain import errors
from corral.executors import base
from corral.executors.local import claims, keeper, processes, tasks
from corral.oskit import procs
from tests import factories
from tests.integration import local_rig


@pytest.fixture
def rig(tmp_path: pathlib.Path) -> Iterator[local_rig.Rig]:
    with local_rig.rigged(tmp_path) as r:
        yield r


# Scripts. `ROOT` is the rig's directory; a task says it is ready by creating a file there.

READY_THEN_WAIT = """
    import os, pathlib, sys, time
    root = pathlib.Path(os.environ["ROOT"])
    (root / "ready-{tag}").write_text(str(os.getpid()))
    while not (root / "go-{tag}").exists():
        time.sleep(0.02)
    sys.exit({code})
"""


def ready_then_wait(tag: str, code: int = 0) -> str:
    return READY_THEN_WAIT.format(tag=tag, code=code)


# --- exits and logs ---------------------------------------------------------------------


@pytest.mark.parametrize("code", [0, 3])
def test_exit_code_and_output_are_kept(rig: local_rig.Rig, code: int) -> None:
    ex = rig.executor()
    spec = rig.spec(f"""
        import sys
        print("hello from the task")
        print("to stderr", file=sys.stderr)
        sys.exit({code})
    """)

    status = local_rig.wait_status(ex, rig.launch(ex, spec))

    assert status.state is base.State.EXITED
    assert status.exit_code == code
    log = pathlib.Path(spec.log_path).read_text()
    assert "hello from the task" in log
    assert "to stderr" in log


def test_a_launchs_cleanup_runs_once_the_task_and_what_it_left_have_ended(
        rig: local_rig.Rig) -> None:
    ex = rig.executor()
    left = rig.root / "left.pid"
    seen = rig.root / "cleanup-saw"
    spec = dataclasses.replace(rig.spec(f"""
        import subprocess
        child = subprocess.Popen(["sleep", "60"], start_new_session=True)
        open({str(left)!r}, "w").write(str(child.pid))
    """), cleanup=("/bin/sh", "-c", f"kill -0 $(cat {left}) 2>/dev/null; echo $? > {seen}"))

    status = local_rig.wait_status(ex, rig.launch(ex, spec))

    assert status.exit_code == 0
    assert seen.read_text() == "1\n"  # it ran, and what the task left was gone by then


def test_task_runs_in_its_cwd_with_its_environment(rig: local_rig.Rig) -> None:
    ex = rig.executor()
    spec = rig.spec("""
        import os
        print("cwd", os.getcwd())
        print("env", os.environ["ROOT"])
    """)

    assert local_rig.wait_status(ex, rig.launch(ex, spec)).exit_code == 0

    log = pathlib.Path(spec.log_path).read_text()
    assert f"cwd {spec.cwd}" in log
    assert f"env {rig.root}" in log


def test_a_missing_program_fails_to_start_and_says_why(rig: local_rig.Rig) -> None:
    ex = rig.executor()
    spec = dataclasses.replace(rig.spec(""), argv=(str(rig.root / "no-such-program"),))

    with pytest.raises(errors.LaunchError, match=r"No such file.*no-such-program"):
        ex.launch(spec)

    # Its claim says it never started: a restarted server would start it anew.
    assert rig.executor().recover(spec).state is base.State.NOT_STARTED


# --- stopping ---------------------------------------------------------------------------


def test_sigterm_stops_the_task_and_its_group(rig: local_rig.Rig) -> None:
    ex = rig.executor()
    pids = rig.root / "pids"
    rig.pid_files.append(pids)
    spec = rig.spec(f"""
        import os, pathlib, subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        pathlib.Path({str(pids)!r}).write_text(f"{{os.getpid()}} {{child.pid}}")
        time.sleep(60)
    """)
    handle = rig.launch(ex, spec)
    factories.wait_for(lambda: len(local_rig.read_pids(pids)) == 2, what="pids")

    ex.cancel(handle, force=False)

    status = local_rig.wait_status(ex, handle)
    assert status.state is base.State.EXITED
    assert status.exit_code != 0
    factories.wait_for(lambda: not any(factories.alive(p) for p in local_rig.read_pids(pids)),
                       5, "the group to die")


def test_a_task_ignoring_sigterm_survives_it_but_not_sigkill(rig: local_rig.Rig) -> None:
    ex = rig.executor()
    got = rig.root / "got-term"
    spec = rig.spec(f"""
        import os, pathlib, signal, time
        def note(*_):
            pathlib.Path({str(got)!r}).write_text("TERM")
        signal.signal(signal.SIGTERM, note)
        pathlib.Path(os.environ["ROOT"], "ready-t").write_text("")
        while True:
            time.sleep(0.05)
    """)
    handle = rig.launch(ex, spec)
    factories.wait_for((rig.root / "ready-t").exists, what="the task to start")

    ex.cancel(handle, force=False)
    factories.wait_for(got.exists, what="the task to receive SIGTERM")

    assert ex.poll(handle).state is base.State.RUNNING
    ex.cancel(handle, force=True)
    status = local_rig.wait_status(ex, handle)
    assert status.state is base.State.EXITED
    assert status.exit_code == 128 + signal.SIGKILL


def test_force_cancel_leaves_no_descendant_alive(rig: local_rig.Rig) -> None:
    """Children, and a grandchild that left the process group with setsid, all die."""
    ex = rig.executor()
    pids = rig.root / "pids"
    rig.pid_files.append(pids)
    spec = rig.spec(f"""
        import os, pathlib, signal, subprocess, sys, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        pids = pathlib.Path({str(pids)!r})
        grandchild = (
            "import os, time; os.setsid(); "
            f"open({{str(pids)!r}}, 'a').write(f' {{{{os.getpid()}}}}'); time.sleep(60)"
        )
        child = (
            "import subprocess, sys, time; "
            f"subprocess.Popen([sys.executable, '-c', {{grandchild!r}}]); time.sleep(60)"
        )
        kids = [subprocess.Popen([sys.executable, "-c", child]),
                subprocess.Popen(["sleep", "60"])]
        with open(pids, "a") as fh:
            fh.write(" ".join(str(p) for p in [os.getpid(), *(k.pid for k in kids)]))
        time.sleep(60)
    """)
    handle = rig.launch(ex, spec)
    factories.wait_for(lambda: len(local_rig.read_pids(pids)) == 4, what="the whole tree to start")
    tree = local_rig.read_pids(pids)
    assert os.getsid(tree[-1]) != os.getsid(tree[0])  # the grandchild did leave

    ex.cancel(handle, force=True)

    assert local_rig.wait_status(ex, handle).state is base.State.EXITED
    factories.wait_for(
        lambda: not any(factories.alive(p) for p in tree), 5, f"all of {tree} to die"
    )


def test_force_cancel_kills_a_daemonised_grandchild(rig: local_rig.Rig) -> None:
    ex = rig.executor()
    pids = rig.root / "pids"
    rig.pid_files.append(pids)
    spec = rig.spec(f"""
        import os, pathlib, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                pathlib.Path({str(pids)!r}).write_text(str(os.getpid()))
                time.sleep(60)
            os._exit(0)
        time.sleep(60)
    """)
    handle = rig.launch(ex, spec)
    factories.wait_for(lambda: len(local_rig.read_pids(pids)) == 1, what="the daemon to start")

    ex.cancel(handle, force=True)

    assert local_rig.wait_status(ex, handle).state is base.State.EXITED
    daemon = local_rig.read_pids(pids)[0]
    factories.wait_for(lambda: not factories.alive(daemon), 5, "the daemon to die")


# --- recovery after a restart -----------------------------------------------------------


def test_recover_of_a_launch_that_never_ran_stops_it_for_good(rig: local_rig.Rig) -> None:
    marker = rig.root / "ran"
    spec = rig.spec(f"import pathlib; pathlib.Path({str(marker)!r}).write_text('ran')")

    status = rig.executor().recover(spec)

    assert status.state is base.State.NOT_STARTED
    # A launcher that still held the request when the old server died now refuses it.
    with pytest.raises(errors.LaunchError, match="given up"):
        rig.executor().launch(spec)
    assert not marker.exists()
    assert rig.executor().recover(spec).state is base.State.NOT_STARTED


def test_recover_finds_a_running_launch_and_a_fresh_executor_adopts_it(rig: local_rig.Rig) -> None:
    spec = rig.spec(ready_then_wait("r", code=5))
    first = rig.launch(rig.executor(), spec)
    factories.wait_for((rig.root / "ready-r").exists, what="the task to start")

    recovered = rig.executor().recover(spec)

    assert recovered.state is base.State.RUNNING
    assert recovered.handle is not None
    assert recovered.handle.pid == first.pid
    assert recovered.handle.start_time == first.start_time
    later = rig.executor()
    assert later.adopt(recovered.handle).state is base.State.RUNNING
    (rig.root / "go-r").touch()
    status = local_rig.wait_status(later, recovered.handle)
    assert (status.state, status.exit_code) == (base.State.EXITED, 5)


def test_recover_of_a_launch_that_ran_and_ended_reads_its_exit_code(rig: local_rig.Rig) -> None:
    spec = rig.spec("import sys; sys.exit(4)")
    handle = rig.launch(rig.executor(), spec)
    factories.wait_for(lambda: not factories.alive(handle.pid), what="the task to end")

    status = rig.executor().recover(spec)

    assert (status.state, status.exit_code) == (base.State.EXITED, 4)


def test_one_file_per_launch_holds_its_claim_and_exit_code(rig: local_rig.Rig) -> None:
    spec = rig.spec("import sys; sys.exit(6)")
    handle = rig.launch(rig.executor(), spec)
    factories.wait_for(lambda: not factories.alive(handle.pid), what="the task to end")

    assert sorted(os.listdir(spec.control_dir)) == [f"{spec.task}.{spec.launch_id}.claim"]
    factories.wait_for(lambda: claim_lines(handle)[-1] == "6", what="the exit code")
    head, *cgroup, pid, code = claim_lines(handle)
    # its keeper, the task's parent, by pid and start time (gone now: it exits last)
    assert re.fullmatch(r"L \d+ \d+(\.0)?", head)
    assert (pid, code) == (str(handle.pid), "6")
    assert all(line.startswith("C ") for line in cgroup)  # where its cgroup was, if any


def claim_lines(handle: base.Handle) -> list[str]:
    return pathlib.Path(handle.prefix + ".claim").read_text().splitlines()


def keeper_of(handle: base.Handle) -> int:
    """The pid of the task's keeper, its parent (from the claim's first line)."""
    return int(claim_lines(handle)[0].split()[1])


def launcher_of(handle: base.Handle) -> int:
    """The pid of the launcher that forked the task's keeper."""
    return int(psutil.Process(keeper_of(handle)).ppid())


def test_a_wrapper_claim_of_an_earlier_version_is_still_read(rig: local_rig.Rig) -> None:
    """A task started before an upgrade by the `/bin/sh` wrapper, whose claim holds the
    wrapper's pid and then the exit code, ended while the server was down."""
    spec = rig.spec("pass")
    os.makedirs(spec.control_dir, exist_ok=True)
    gone = subprocess.Popen(["true"])
    gone.wait()
    pathlib.Path(claims.control_prefix(spec) + ".claim").write_text(f"{gone.pid}\n3\n")

    status = rig.executor().recover(spec)

    assert (status.state, status.exit_code) == (base.State.EXITED, 3)


def test_an_exit_file_of_an_earlier_wrapper_is_still_read(rig: local_rig.Rig) -> None:
    """A task started before an upgrade, by a wrapper that wrote its exit code to a
    separate `.exit` file, ended while the server was down."""
    spec = rig.spec("pass")
    os.makedirs(spec.control_dir, exist_ok=True)
    prefix = claims.control_prefix(spec)
    gone = subprocess.Popen(["true"])
    gone.wait()  # a pid that no longer runs
    pathlib.Path(prefix + ".claim").write_text(f"{gone.pid}\n")
    pathlib.Path(prefix + ".exit").write_text("9\n")

    status = rig.executor().recover(spec)

    assert (status.state, status.exit_code) == (base.State.EXITED, 9)


def test_a_task_that_ended_unwatched_keeps_its_true_exit_code(rig: local_rig.Rig) -> None:
    handle = rig.launch(rig.executor(), rig.spec("import sys; sys.exit(7)"))
    factories.wait_for(lambda: not factories.alive(handle.pid), what="the task to end")

    status = rig.executor().adopt(handle)

    assert (status.state, status.exit_code) == (base.State.EXITED, 7)


def test_a_task_killed_by_a_signal_while_unwatched_exits_128_plus_n(rig: local_rig.Rig) -> None:
    handle = rig.launch(rig.executor(), rig.spec(ready_then_wait("k")))
    factories.wait_for((rig.root / "ready-k").exists, what="the task to start")
    os.killpg(handle.pid, signal.SIGKILL)
    factories.wait_for(lambda: not factories.alive(handle.pid), what="the group to die")

    status = rig.executor().adopt(handle)

    assert (status.state, status.exit_code) == (base.State.EXITED, 128 + signal.SIGKILL)


def test_a_task_whose_launcher_was_killed_keeps_its_exit_code(
    rig: local_rig.Rig, caplog: pytest.LogCaptureFixture
) -> None:
    ex = rig.executor()
    handle = rig.launch(ex, rig.spec(ready_then_wait("k", code=5)))
    factories.wait_for((rig.root / "ready-k").exists, what="the task to start")
    launcher_pid = launcher_of(handle)
    os.kill(launcher_pid, signal.SIGKILL)  # the OOM killer, a stray kill -9
    factories.wait_for(lambda: not factories.alive(launcher_pid), what="the launcher to die")

    factories.wait_for(lambda: "task launcher" in caplog.text, what="the server to notice")
    # Still running, and watched: its end wakes the scheduler.
    assert ex.poll(handle).state is base.State.RUNNING
    woke = threading.Event()
    ex.set_waker(woke.set)
    (rig.root / "go-k").touch()
    assert woke.wait(10)
    status = local_rig.wait_status(ex, handle)

    # Its keeper outlived the launcher and recorded how it ended.
    assert (status.state, status.exit_code) == (base.State.EXITED, 5)
    # A new launcher takes the next launch.
    assert local_rig.wait_status(ex, rig.launch(ex, rig.spec("pass"))).exit_code == 0


def test_a_task_whose_keeper_and_launcher_were_killed_is_lost_when_it_ends(
        rig: local_rig.Rig) -> None:
    ex = rig.executor()
    handle = rig.launch(ex, rig.spec(ready_then_wait("k")))
    factories.wait_for((rig.root / "ready-k").exists, what="the task to start")
    launcher_pid, keeper_pid = launcher_of(handle), keeper_of(handle)
    os.kill(launcher_pid, signal.SIGKILL)
    factories.wait_for(lambda: not factories.alive(launcher_pid), what="the launcher to die")
    os.kill(keeper_pid, signal.SIGKILL)
    factories.wait_for(lambda: not factories.alive(keeper_pid), what="the keeper to die")

    assert ex.poll(handle).state is base.State.RUNNING
    (rig.root / "go-k").touch()
    status = local_rig.wait_status(ex, handle)

    assert status.state is base.State.LOST
    assert status.exit_code is None
    assert "exit code is unknown" in status.message


def test_a_task_whose_keeper_was_killed_is_stopped_and_lost(rig: local_rig.Rig) -> None:
    """No one could record its end any more: the launcher stops it and all it started."""
    ex = rig.executor()
    handle = rig.launch(ex, rig.spec("""
        import os, pathlib, subprocess, sys, time
        root = pathlib.Path(os.environ["ROOT"])
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                                 start_new_session=True)
        (root / "ready-l").write_text(str(child.pid))
        time.sleep(60)
    """))
    child_pid = int(wait_for_text(rig.root / "ready-l"))
    os.kill(keeper_of(handle), signal.SIGKILL)

    status = local_rig.wait_status(ex, handle)

    assert status.state is base.State.LOST
    factories.wait_for(lambda: not factories.alive(handle.pid), 5, "the task to be stopped")
    factories.wait_for(lambda: not factories.alive(child_pid), 5, "its child to be stopped")


def test_a_task_declared_lost_is_not_left_running(rig: local_rig.Rig) -> None:
    """The task's own process is gone without an exit code; what it started goes too."""
    handle = rig.launch(rig.executor(), rig.spec("""
        import os, pathlib, subprocess, sys, time
        root = pathlib.Path(os.environ["ROOT"])
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        (root / "ready-l").write_text(str(child.pid))
        time.sleep(60)
    """))
    child_pid = int(wait_for_text(rig.root / "ready-l"))
    for pid in (launcher_of(handle), keeper_of(handle)):
        local_rig.kill_and_wait(pid)
    os.kill(handle.pid, signal.SIGKILL)  # the task's own process only
    factories.wait_for(lambda: not factories.alive(handle.pid), what="the task to die")

    status = rig.executor().adopt(handle)

    assert status.state is base.State.LOST
    factories.wait_for(lambda: not factories.alive(child_pid), 5, "the orphan to be stopped")


def wait_for_text(path: pathlib.Path) -> str:
    factories.wait_for(lambda: path.exists() and path.read_text() != "", what=str(path))
    return path.read_text()


def test_adopt_does_not_mistake_a_reused_pid_for_the_task(rig: local_rig.Rig) -> None:
    """A handle whose pid now belongs to another process (other start time) is not running."""
    ex = rig.executor()
    other = rig.launch(ex, rig.spec(ready_then_wait("o")))
    factories.wait_for((rig.root / "ready-o").exists, what="the other process to start")
    stale = base.Handle(
        node="local",
        task="worker-0",
        pid=other.pid,
        start_time=other.start_time - 1,
        control_dir=str(rig.root / "nowhere"),
        launch_id="gone",
    )

    status = rig.executor().adopt(stale)

    assert status.state is base.State.LOST
    rig.executor().cancel(stale, force=True)
    assert ex.poll(other).state is base.State.RUNNING


# --- watching and sampling --------------------------------------------------------------


def test_the_waker_is_called_when_a_task_ends(rig: local_rig.Rig) -> None:
    ex = rig.executor()
    woke = threading.Event()
    ex.set_waker(woke.set)
    rig.launch(ex, rig.spec(ready_then_wait("w")))
    factories.wait_for((rig.root / "ready-w").exists, what="the task to start")
    woke.clear()

    (rig.root / "go-w").touch()

    assert woke.wait(10)


def test_the_waker_is_called_when_an_adopted_task_ends(rig: local_rig.Rig) -> None:
    handle = rig.launch(rig.executor(), rig.spec(ready_then_wait("a")))
    factories.wait_for((rig.root / "ready-a").exists, what="the task to start")
    later = rig.executor()
    woke = threading.Event()
    later.set_waker(woke.set)
    assert later.adopt(handle).state is base.State.RUNNING
    woke.clear()

    (rig.root / "go-a").touch()

    assert woke.wait(10)


def test_sample_reports_memory_of_a_running_task(rig: local_rig.Rig) -> None:
    ex = rig.executor()
    handle = rig.launch(ex, rig.spec(ready_then_wait("s")))
    factories.wait_for((rig.root / "ready-s").exists, what="the task to start")

    first = ex.sample(handle)
    second = ex.sample(handle)

    assert first is not None and second is not None
    assert second.rss_mb > 0
    assert second.cpu_percent >= 0
    (rig.root / "go-s").touch()
    local_rig.wait_status(ex, handle)
    ex.release(handle)
    assert ex.sample(handle) is None


# --- a launcher killed between claiming a launch and recording its pid --------------------


def dead_launcher_claim(spec: base.LaunchSpec) -> None:
    os.makedirs(spec.control_dir, exist_ok=True)
    gone = subprocess.Popen(["true"])
    gone.wait()
    pathlib.Path(claims.control_prefix(spec) + ".claim").write_text(f"L {gone.pid} 1\n")


def test_recover_stops_a_task_its_dead_launcher_did_not_record(rig: local_rig.Rig) -> None:
    """A task whose keeper died before recording its pid has no one to record its end:
    adopted, it would run to its end and be lost all the same. It is stopped now."""
    spec = rig.spec("")
    dead_launcher_claim(spec)
    task = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                            env={**os.environ, processes.LAUNCH_ENV: spec.launch_id},
                            start_new_session=True)
    rig.pid_files.append(rig.root / "task.pid")
    (rig.root / "task.pid").write_text(str(task.pid))
    # What recover looks for: the process carrying the launch's marker in its environment.
    # (Popen returns while the exec may still be setting that environment up.)
    factories.wait_for(lambda: task.pid in processes.marked(spec.launch_id),
                       what="the task to carry its launch's marker")

    status = rig.executor().recover(spec)

    assert status.state is base.State.LOST
    assert "whether it ran is unknown" in status.message
    assert task.wait(5) == -signal.SIGKILL


def test_recover_calls_lost_a_launch_its_dead_launcher_may_have_run(rig: local_rig.Rig) -> None:
    spec = rig.spec("")
    dead_launcher_claim(spec)

    status = rig.executor().recover(spec)

    assert status.state is base.State.LOST
    assert "whether it ran is unknown" in status.message


def test_a_launch_reports_the_start_time_proc_shows(rig: local_rig.Rig) -> None:
    # The launcher takes a task's start time from the clock the kernel stamps a fork with,
    # instead of /proc, which holds a read back until the task's exec is done.
    spec = rig.spec(ready_then_wait("t"))
    handle = rig.launch(rig.executor(), spec)
    factories.wait_for((rig.root / "ready-t").exists, what="the task to start")

    assert handle.start_time == procs.start_ticks(handle.pid)
    (rig.root / "go-t").touch()


def test_the_start_time_of_a_fork_is_known_from_the_clock_unless_a_tick_passed() -> None:
    tick = keeper.TICK_NS
    assert keeper.forked_ticks(5 * tick, 6 * tick - 1) == "5"
    assert keeper.forked_ticks(5 * tick + 1, 6 * tick) is None
    for _ in range(20):
        before = time.clock_gettime_ns(time.CLOCK_BOOTTIME)
        proc = subprocess.Popen([sys.executable, "-c", "pass"])
        ticks = keeper.forked_ticks(before, time.clock_gettime_ns(time.CLOCK_BOOTTIME))
        try:
            assert ticks in (None, keeper.start_ticks(proc.pid))
        finally:
            proc.wait()


# --- a launcher that does not answer -----------------------------------------------------


def test_a_launch_whose_launcher_dies_before_answering_fails_and_leaves_nothing_running(
        rig: local_rig.Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    ex = rig.executor()
    rig.launch(ex, rig.spec("pass"))  # the launcher runs
    starter = ex._launcher
    assert starter is not None
    os.kill(starter.proc.pid, signal.SIGSTOP)  # it cannot read the request ...
    answer = tasks._Launcher._answer

    def killed_first(self: tasks._Launcher, deadline: float) -> bytes:
        os.kill(self.proc.pid, signal.SIGKILL)  # ... and dies before it has
        return answer(self, deadline)

    monkeypatch.setattr(tasks._Launcher, "_answer", killed_first)
    spec = rig.spec(ready_then_wait("d"))

    with pytest.raises(errors.LaunchError, match="launcher has stopped"):
        ex.launch(spec)
    monkeypatch.undo()
    assert not (rig.root / "ready-d").exists()
    assert processes.marked(spec.launch_id) == []
    assert rig.executor().recover(spec).state is base.State.NOT_STARTED
    # A new launcher takes the next launch.
    assert local_rig.wait_status(ex, rig.launch(ex, rig.spec("pass"))).exit_code == 0


def test_a_launch_its_launcher_does_not_answer_in_time_never_runs(
        rig: local_rig.Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    ex = rig.executor()
    rig.launch(ex, rig.spec("pass"))  # the launcher runs
    starter = ex._launcher
    assert starter is not None
    monkeypatch.setattr(tasks, "LAUNCH_TIMEOUT_S", 0.2)
    spec = rig.spec(ready_then_wait("late"))
    os.kill(starter.proc.pid, signal.SIGSTOP)  # too busy to answer, for now
    try:
        with pytest.raises(errors.LaunchError, match="did not answer"):
            ex.launch(spec)
    finally:
        os.kill(starter.proc.pid, signal.SIGCONT)

    # It reads the request once it goes on, finds the launch given up, and (told that no
    # more requests come) exits: it has no task left to wait for.
    factories.wait_for(lambda: starter.proc.poll() is not None, what="the launcher to exit")
    assert not (rig.root / "ready-late").exists()
    assert rig.executor().recover(spec).state is base.State.NOT_STARTED


# --- what goes wrong inside the launcher ---------------------------------------------------


def test_a_keeper_that_fails_leaves_its_traceback_in_the_launchers_error_log(
        rig: local_rig.Rig, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The launcher and its keepers outlive the server, so they do not write to its
    output: what goes wrong in them is appended to a file of the server's (before, it went
    nowhere, and a keeper's bug left no trace but a failed launch)."""
    found = tmp_path / "launcher.log"
    ex = rig.executor(errors_to=found)
    assert local_rig.wait_status(ex, rig.launch(ex, rig.spec("pass"))).exit_code == 0
    assert found.read_text() == ""  # nothing for a launch that goes well
    assert found.stat().st_mode & 0o777 == 0o600
    # A keeper given what it cannot read (as a bug of its own would make it fail).
    monkeypatch.setattr(ex, "_cgroup", lambda spec: {"version": "two", "dirs": []})
    with pytest.raises(errors.LaunchError):
        ex.launch(rig.spec("pass"))
    monkeypatch.undo()
    text = factories.wait_for(lambda: "Traceback" in (t := found.read_text()) and t, 10,
                              "the keeper's traceback")
    assert "ValueError" in text and "'two'" in text
    # The launcher itself goes on.
    assert local_rig.wait_status(ex, rig.launch(ex, rig.spec("pass"))).exit_code == 0
