"""The local executor with real processes: exits, signals, process trees, crash recovery."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator

import pytest

from corral.domain import errors, resources
from corral.executors import base, local
from corral.executors import launcher as launcher_mod
from tests import factories

NODE = resources.Node(name="local", cpu=2, memory_mb=4096)


class Rig:
    """Builds specs under a temp dir, hands out executors, and cleans every process up."""

    def __init__(self, root: pathlib.Path) -> None:
        self.root = root
        self.executors: list[local.LocalExecutor] = []
        self.handles: list[base.Handle] = []
        self.pid_files: list[pathlib.Path] = []

    def executor(self) -> local.LocalExecutor:
        ex = local.LocalExecutor(NODE)
        self.executors.append(ex)
        return ex

    def spec(self, source: str, *, task: str = "worker-0") -> base.LaunchSpec:
        """A launch of `python -c source`; the script sees the rig's root as ROOT."""
        run = self.root / f"run-{uuid.uuid4().hex[:8]}"
        (run / "ctl").mkdir(parents=True)  # as the scheduler makes it before a launch
        return base.LaunchSpec(
            job_id="job",
            task=task,
            attempt=1,
            launch_id=uuid.uuid4().hex[:16],
            argv=(sys.executable, "-c", textwrap.dedent(source)),
            cwd=str(run),
            env={**os.environ, "ROOT": str(self.root)},
            log_path=str(run / "logs" / "t.log"),
            control_dir=str(run / "ctl"),
            node="local",
        )

    def launch(self, ex: local.LocalExecutor, spec: base.LaunchSpec) -> base.Handle:
        handle = ex.launch(spec)
        self.handles.append(handle)
        return handle

    def cleanup(self) -> None:
        for path in self.pid_files:
            for pid in read_pids(path):
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
        for h in self.handles:
            with contextlib.suppress(OSError):
                os.killpg(h.pid, signal.SIGKILL)
        for ex in self.executors:
            ex.close()


@pytest.fixture
def rig(tmp_path: pathlib.Path) -> Iterator[Rig]:
    r = Rig(tmp_path)
    yield r
    r.cleanup()


def wait_status(ex: local.LocalExecutor, handle: base.Handle, timeout: float = 15.0) -> base.Status:
    """Poll until the task is no longer running; returns its final status."""
    found: list[base.Status] = []

    def done() -> bool:
        found[:] = [ex.poll(handle)]
        return found[0].state is not base.State.RUNNING

    factories.wait_for(done, timeout, f"{handle.task} to end")
    return found[0]


def read_pids(path: pathlib.Path) -> list[int]:
    if not path.exists():
        return []
    return [int(x) for x in path.read_text().split()]


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
def test_exit_code_and_output_are_kept(rig: Rig, code: int) -> None:
    ex = rig.executor()
    spec = rig.spec(f"""
        import sys
        print("hello from the task")
        print("to stderr", file=sys.stderr)
        sys.exit({code})
    """)

    status = wait_status(ex, rig.launch(ex, spec))

    assert status.state is base.State.EXITED
    assert status.exit_code == code
    log = pathlib.Path(spec.log_path).read_text()
    assert "hello from the task" in log
    assert "to stderr" in log


def test_task_runs_in_its_cwd_with_its_environment(rig: Rig) -> None:
    ex = rig.executor()
    spec = rig.spec("""
        import os
        print("cwd", os.getcwd())
        print("env", os.environ["ROOT"])
    """)

    assert wait_status(ex, rig.launch(ex, spec)).exit_code == 0

    log = pathlib.Path(spec.log_path).read_text()
    assert f"cwd {spec.cwd}" in log
    assert f"env {rig.root}" in log


def test_a_missing_program_fails_to_start_and_says_why(rig: Rig) -> None:
    ex = rig.executor()
    spec = dataclasses.replace(rig.spec(""), argv=(str(rig.root / "no-such-program"),))

    with pytest.raises(errors.LaunchError, match=r"No such file.*no-such-program"):
        ex.launch(spec)

    # Its claim says it never started: a restarted server would start it anew.
    assert rig.executor().recover(spec).state is base.State.NOT_STARTED


# --- stopping ---------------------------------------------------------------------------


def test_sigterm_stops_the_task_and_its_group(rig: Rig) -> None:
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
    factories.wait_for(lambda: len(read_pids(pids)) == 2, what="pids")

    ex.cancel(handle, force=False)

    status = wait_status(ex, handle)
    assert status.state is base.State.EXITED
    assert status.exit_code != 0
    factories.wait_for(
        lambda: not any(factories.alive(p) for p in read_pids(pids)), 5, "the group to die"
    )


def test_a_task_ignoring_sigterm_survives_it_but_not_sigkill(rig: Rig) -> None:
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
    status = wait_status(ex, handle)
    assert status.state is base.State.EXITED
    assert status.exit_code == 128 + signal.SIGKILL


def test_force_cancel_leaves_no_descendant_alive(rig: Rig) -> None:
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
    factories.wait_for(lambda: len(read_pids(pids)) == 4, what="the whole tree to start")
    tree = read_pids(pids)
    assert os.getsid(tree[-1]) != os.getsid(tree[0])  # the grandchild did leave

    ex.cancel(handle, force=True)

    assert wait_status(ex, handle).state is base.State.EXITED
    factories.wait_for(
        lambda: not any(factories.alive(p) for p in tree), 5, f"all of {tree} to die"
    )


def test_force_cancel_kills_a_daemonised_grandchild(rig: Rig) -> None:
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
    factories.wait_for(lambda: len(read_pids(pids)) == 1, what="the daemon to start")

    ex.cancel(handle, force=True)

    assert wait_status(ex, handle).state is base.State.EXITED
    daemon = read_pids(pids)[0]
    factories.wait_for(lambda: not factories.alive(daemon), 5, "the daemon to die")


# --- recovery after a restart -----------------------------------------------------------


def test_recover_of_a_launch_that_never_ran_stops_it_for_good(rig: Rig) -> None:
    marker = rig.root / "ran"
    spec = rig.spec(f"import pathlib; pathlib.Path({str(marker)!r}).write_text('ran')")

    status = rig.executor().recover(spec)

    assert status.state is base.State.NOT_STARTED
    # A launcher that still held the request when the old server died now refuses it.
    with pytest.raises(errors.LaunchError, match="given up"):
        rig.executor().launch(spec)
    assert not marker.exists()
    assert rig.executor().recover(spec).state is base.State.NOT_STARTED


def test_recover_finds_a_running_launch_and_a_fresh_executor_adopts_it(rig: Rig) -> None:
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
    status = wait_status(later, recovered.handle)
    assert (status.state, status.exit_code) == (base.State.EXITED, 5)


def test_recover_of_a_launch_that_ran_and_ended_reads_its_exit_code(rig: Rig) -> None:
    spec = rig.spec("import sys; sys.exit(4)")
    handle = rig.launch(rig.executor(), spec)
    factories.wait_for(lambda: not factories.alive(handle.pid), what="the task to end")

    status = rig.executor().recover(spec)

    assert (status.state, status.exit_code) == (base.State.EXITED, 4)


def test_one_file_per_launch_holds_its_claim_and_exit_code(rig: Rig) -> None:
    spec = rig.spec("import sys; sys.exit(6)")
    handle = rig.launch(rig.executor(), spec)
    factories.wait_for(lambda: not factories.alive(handle.pid), what="the task to end")

    assert sorted(os.listdir(spec.control_dir)) == [f"{spec.task}.{spec.launch_id}.claim"]
    factories.wait_for(lambda: len(claim_lines(handle)) == 3, what="the exit code")
    head, pid, code = claim_lines(handle)
    launcher_pid = int(head.split()[1])
    assert head == f"L {launcher_pid} {launcher_mod.start_ticks(launcher_pid)}"
    assert (pid, code) == (str(handle.pid), "6")


def claim_lines(handle: base.Handle) -> list[str]:
    return pathlib.Path(handle.prefix + ".claim").read_text().splitlines()


def launcher_of(handle: base.Handle) -> int:
    """The pid of the launcher that started the task (from the claim's first line)."""
    return int(claim_lines(handle)[0].split()[1])


def test_a_wrapper_claim_of_an_earlier_version_is_still_read(rig: Rig) -> None:
    """A task started before an upgrade by the `/bin/sh` wrapper, whose claim holds the
    wrapper's pid and then the exit code, ended while the server was down."""
    spec = rig.spec("pass")
    os.makedirs(spec.control_dir, exist_ok=True)
    gone = subprocess.Popen(["true"])
    gone.wait()
    pathlib.Path(local.control_prefix(spec) + ".claim").write_text(f"{gone.pid}\n3\n")

    status = rig.executor().recover(spec)

    assert (status.state, status.exit_code) == (base.State.EXITED, 3)


def test_an_exit_file_of_an_earlier_wrapper_is_still_read(rig: Rig) -> None:
    """A task started before an upgrade, by a wrapper that wrote its exit code to a
    separate `.exit` file, ended while the server was down."""
    spec = rig.spec("pass")
    os.makedirs(spec.control_dir, exist_ok=True)
    prefix = local.control_prefix(spec)
    gone = subprocess.Popen(["true"])
    gone.wait()  # a pid that no longer runs
    pathlib.Path(prefix + ".claim").write_text(f"{gone.pid}\n")
    pathlib.Path(prefix + ".exit").write_text("9\n")

    status = rig.executor().recover(spec)

    assert (status.state, status.exit_code) == (base.State.EXITED, 9)


def test_a_task_that_ended_unwatched_keeps_its_true_exit_code(rig: Rig) -> None:
    handle = rig.launch(rig.executor(), rig.spec("import sys; sys.exit(7)"))
    factories.wait_for(lambda: not factories.alive(handle.pid), what="the task to end")

    status = rig.executor().adopt(handle)

    assert (status.state, status.exit_code) == (base.State.EXITED, 7)


def test_a_task_killed_by_a_signal_while_unwatched_exits_128_plus_n(rig: Rig) -> None:
    handle = rig.launch(rig.executor(), rig.spec(ready_then_wait("k")))
    factories.wait_for((rig.root / "ready-k").exists, what="the task to start")
    os.killpg(handle.pid, signal.SIGKILL)
    factories.wait_for(lambda: not factories.alive(handle.pid), what="the group to die")

    status = rig.executor().adopt(handle)

    assert (status.state, status.exit_code) == (base.State.EXITED, 128 + signal.SIGKILL)


def test_a_task_whose_launcher_was_killed_is_lost_when_it_ends(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    ex = rig.executor()
    handle = rig.launch(ex, rig.spec(ready_then_wait("k")))
    factories.wait_for((rig.root / "ready-k").exists, what="the task to start")
    launcher = launcher_of(handle)
    os.kill(launcher, signal.SIGKILL)  # the OOM killer, a stray kill -9
    factories.wait_for(lambda: not factories.alive(launcher), what="the launcher to die")

    factories.wait_for(lambda: "task launcher" in caplog.text, what="the server to notice")
    # Still running, and watched: its end wakes the scheduler.
    assert ex.poll(handle).state is base.State.RUNNING
    woke = threading.Event()
    ex.set_waker(woke.set)
    (rig.root / "go-k").touch()
    assert woke.wait(10)
    status = wait_status(ex, handle)

    assert status.state is base.State.LOST
    assert status.exit_code is None
    assert "exit code is unknown" in status.message
    # A new launcher takes the next launch.
    assert wait_status(ex, rig.launch(ex, rig.spec("pass"))).exit_code == 0


def test_a_task_declared_lost_is_not_left_running(rig: Rig) -> None:
    """The task's own process is gone without an exit code; what it started goes too."""
    handle = rig.launch(rig.executor(), rig.spec("""
        import os, pathlib, subprocess, sys, time
        root = pathlib.Path(os.environ["ROOT"])
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        (root / "ready-l").write_text(str(child.pid))
        time.sleep(60)
    """))
    child_pid = int(wait_for_text(rig.root / "ready-l"))
    launcher = launcher_of(handle)
    os.kill(launcher, signal.SIGKILL)
    factories.wait_for(lambda: not factories.alive(launcher), what="the launcher to die")
    os.kill(handle.pid, signal.SIGKILL)  # the task's own process only
    factories.wait_for(lambda: not factories.alive(handle.pid), what="the task to die")

    status = rig.executor().adopt(handle)

    assert status.state is base.State.LOST
    factories.wait_for(lambda: not factories.alive(child_pid), 5, "the orphan to be stopped")


def wait_for_text(path: pathlib.Path) -> str:
    factories.wait_for(lambda: path.exists() and path.read_text() != "", what=str(path))
    return path.read_text()


def test_adopt_does_not_mistake_a_reused_pid_for_the_task(rig: Rig) -> None:
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


def test_the_waker_is_called_when_a_task_ends(rig: Rig) -> None:
    ex = rig.executor()
    woke = threading.Event()
    ex.set_waker(woke.set)
    rig.launch(ex, rig.spec(ready_then_wait("w")))
    factories.wait_for((rig.root / "ready-w").exists, what="the task to start")
    woke.clear()

    (rig.root / "go-w").touch()

    assert woke.wait(10)


def test_the_waker_is_called_when_an_adopted_task_ends(rig: Rig) -> None:
    handle = rig.launch(rig.executor(), rig.spec(ready_then_wait("a")))
    factories.wait_for((rig.root / "ready-a").exists, what="the task to start")
    later = rig.executor()
    woke = threading.Event()
    later.set_waker(woke.set)
    assert later.adopt(handle).state is base.State.RUNNING
    woke.clear()

    (rig.root / "go-a").touch()

    assert woke.wait(10)


def test_sample_reports_memory_of_a_running_task(rig: Rig) -> None:
    ex = rig.executor()
    handle = rig.launch(ex, rig.spec(ready_then_wait("s")))
    factories.wait_for((rig.root / "ready-s").exists, what="the task to start")

    first = ex.sample(handle)
    second = ex.sample(handle)

    assert first is not None and second is not None
    assert second.rss_mb > 0
    assert second.cpu_percent >= 0
    (rig.root / "go-s").touch()
    wait_status(ex, handle)
    ex.release(handle)
    assert ex.sample(handle) is None


# --- a launcher killed between claiming a launch and recording its pid --------------------


def dead_launcher_claim(spec: base.LaunchSpec) -> None:
    os.makedirs(spec.control_dir, exist_ok=True)
    gone = subprocess.Popen(["true"])
    gone.wait()
    pathlib.Path(local.control_prefix(spec) + ".claim").write_text(f"L {gone.pid} 1\n")


def test_recover_adopts_a_task_its_dead_launcher_did_not_record(rig: Rig) -> None:
    spec = rig.spec("")
    dead_launcher_claim(spec)
    task = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                            env={**os.environ, local.LAUNCH_ENV: spec.launch_id},
                            start_new_session=True)
    rig.pid_files.append(rig.root / "task.pid")
    (rig.root / "task.pid").write_text(str(task.pid))
    factories.wait_for(lambda: local._owned(task.pid, "", spec.launch_id), what="the exec")

    status = rig.executor().recover(spec)

    assert status.state is base.State.RUNNING
    assert status.handle is not None and status.handle.pid == task.pid


def test_recover_calls_lost_a_launch_its_dead_launcher_may_have_run(rig: Rig) -> None:
    spec = rig.spec("")
    dead_launcher_claim(spec)

    status = rig.executor().recover(spec)

    assert status.state is base.State.LOST
    assert "whether it ran is unknown" in status.message


def test_a_launch_reports_the_start_time_proc_shows(rig: Rig) -> None:
    # The launcher takes a task's start time from the clock the kernel stamps a fork with,
    # instead of /proc, which holds a read back until the task's exec is done.
    spec = rig.spec(ready_then_wait("t"))
    handle = rig.launch(rig.executor(), spec)
    factories.wait_for((rig.root / "ready-t").exists, what="the task to start")

    assert handle.start_time == local._start_ticks(handle.pid)
    (rig.root / "go-t").touch()


def test_the_start_time_of_a_fork_is_known_from_the_clock_unless_a_tick_passed() -> None:
    tick = launcher_mod.TICK_NS
    assert launcher_mod.forked_ticks(5 * tick, 6 * tick - 1) == "5"
    assert launcher_mod.forked_ticks(5 * tick + 1, 6 * tick) is None
    for _ in range(20):
        before = time.clock_gettime_ns(time.CLOCK_BOOTTIME)
        proc = subprocess.Popen([sys.executable, "-c", "pass"])
        ticks = launcher_mod.forked_ticks(before, time.clock_gettime_ns(time.CLOCK_BOOTTIME))
        try:
            assert ticks in (None, launcher_mod.start_ticks(proc.pid))
        finally:
            proc.wait()


# --- launches do not wait for the launcher's answer -------------------------------------


def test_a_launch_is_handed_over_without_waiting_for_the_launchers_answer(rig: Rig) -> None:
    ex = rig.executor()
    rig.launch(ex, rig.spec("pass"))  # the launcher runs
    launcher = ex._launcher
    assert launcher is not None
    spec = rig.spec(ready_then_wait("s", code=2))
    os.kill(launcher.proc.pid, signal.SIGSTOP)  # a launcher that cannot answer for now
    try:
        started = ex.begin_launch(spec)  # returns: the scheduler goes on meanwhile
    finally:
        os.kill(launcher.proc.pid, signal.SIGCONT)

    handle = started()  # waits for the answer
    rig.handles.append(handle)
    factories.wait_for((rig.root / "ready-s").exists, what="the task to start")
    assert handle.pid == int((rig.root / "ready-s").read_text())
    (rig.root / "go-s").touch()
    assert wait_status(ex, handle).exit_code == 2


def test_a_launch_found_unanswered_wakes_the_scheduler_when_its_answer_comes(
        rig: Rig) -> None:
    ex = rig.executor()
    woke = threading.Event()
    ex.set_waker(woke.set)
    first = rig.launch(ex, rig.spec("pass"))  # the launcher runs
    assert wait_status(ex, first).exit_code == 0  # (its exit woke the scheduler already)
    launcher = ex._launcher
    assert launcher is not None
    os.kill(launcher.proc.pid, signal.SIGSTOP)
    try:
        started = ex.begin_launch(rig.spec(ready_then_wait("u")))  # a task that stays
        assert not started.ready(wake=False)  # a pass would go on without it
        assert not started.ready(wake=True)  # and ask to be woken when it has come
        woke.clear()
    finally:
        os.kill(launcher.proc.pid, signal.SIGCONT)

    assert woke.wait(10)  # the answer came: the scheduler is told, no need to poll for it
    assert started.ready(wake=False)
    handle = started()
    rig.handles.append(handle)
    factories.wait_for((rig.root / "ready-u").exists, what="the task to start")
    assert handle.pid == int((rig.root / "ready-u").read_text())
    (rig.root / "go-u").touch()


def test_an_answer_read_after_its_tasks_exit_wakes_the_scheduler(rig: Rig) -> None:
    """The answer and the exit come on two pipes: the pass the exit woke may have found the
    launch unanswered, so the answer, read later, wakes another."""
    ex = rig.executor()
    rig.launch(ex, rig.spec("pass"))
    launcher = ex._launcher
    assert launcher is not None
    answer = json.dumps({"id": "l-ended", "pid": 2**22 + 1, "ticks": 1.0}).encode()

    assert ex._on_answers(launcher, [answer]) is False  # nothing wants a pass for it
    ex._exits["l-ended2"] = 0
    assert ex._on_answers(launcher, [answer.replace(b"l-ended", b"l-ended2")]) is True


def test_a_launch_that_fails_in_the_launcher_wakes_the_scheduler(rig: Rig) -> None:
    ex = rig.executor()
    woke = threading.Event()
    ex.set_waker(woke.set)
    spec = dataclasses.replace(rig.spec("pass"), argv=("/nonexistent/python", "-c", "pass"))

    started = ex.begin_launch(spec)

    assert woke.wait(10)  # nothing else would: no task runs to end
    with pytest.raises(errors.LaunchError, match="nonexistent"):
        started()


def test_a_launch_whose_launcher_dies_before_answering_fails_and_leaves_nothing_running(
        rig: Rig) -> None:
    ex = rig.executor()
    rig.launch(ex, rig.spec("pass"))
    launcher = ex._launcher
    assert launcher is not None
    os.kill(launcher.proc.pid, signal.SIGSTOP)
    spec = rig.spec(ready_then_wait("d"))
    started = ex.begin_launch(spec)
    os.kill(launcher.proc.pid, signal.SIGKILL)

    with pytest.raises(errors.LaunchError, match="launcher has stopped"):
        started()
    assert not (rig.root / "ready-d").exists()
    assert local._marked(spec.launch_id) == []


def test_a_launch_under_way_gives_the_same_outcome_however_often_it_is_asked(
        rig: Rig) -> None:
    ex = rig.executor()
    started = ex.begin_launch(rig.spec("pass"))
    handle = started()
    rig.handles.append(handle)
    assert started() == handle  # not a second wait for an answer already taken
    refused = ex.begin_launch(
        dataclasses.replace(rig.spec("pass"), argv=("/nonexistent/python",)))
    for _ in range(2):
        with pytest.raises(errors.LaunchError, match="nonexistent"):
            refused()


# --- follow-on launches -------------------------------------------------------------------

STAMPED = """
    import os, pathlib, time
    root = pathlib.Path(os.environ["ROOT"])
    (root / "start-{tag}").write_text(str(time.monotonic_ns()))
"""


def test_a_follow_on_launch_starts_when_the_task_it_follows_ends(rig: Rig) -> None:
    ex = rig.executor()
    before = rig.launch(ex, rig.spec(ready_then_wait("a")))
    factories.wait_for((rig.root / "ready-a").exists, what="the first task to start")
    assert ex.can_follow(before.launch_id)

    started = ex.follow(rig.spec(STAMPED.format(tag="b")), before.launch_id)
    time.sleep(0.3)
    assert not (rig.root / "start-b").exists()  # held while the first runs
    assert not started.ready(wake=False)  # and not answered: it has no deadline yet

    ended_at = time.monotonic_ns()
    (rig.root / "go-a").touch()
    assert wait_status(ex, before).exit_code == 0
    assert not ex.can_follow(before.launch_id)  # it has ended
    started.due()
    handle = started()  # answered before the first task's exit was told
    rig.handles.append(handle)
    assert wait_status(ex, handle).exit_code == 0
    assert int((rig.root / "start-b").read_text()) > ended_at


def test_a_follow_on_launch_of_a_task_that_has_ended_starts_at_once(rig: Rig) -> None:
    ex = rig.executor()
    before = rig.launch(ex, rig.spec("pass"))
    assert wait_status(ex, before).exit_code == 0

    started = ex.follow(rig.spec(STAMPED.format(tag="c")), before.launch_id)
    factories.wait_for((rig.root / "start-c").exists, what="the follow-on to start")
    handle = started()
    rig.handles.append(handle)
    assert wait_status(ex, handle).exit_code == 0


def test_a_withdrawn_follow_on_launch_never_runs(rig: Rig) -> None:
    ex = rig.executor()
    before = rig.launch(ex, rig.spec(ready_then_wait("w")))
    factories.wait_for((rig.root / "ready-w").exists, what="the first task to start")
    spec = rig.spec(STAMPED.format(tag="x"))
    started = ex.follow(spec, before.launch_id)

    assert ex.withdraw(spec) is True
    assert not started.ready(wake=False)  # its answer (dropped) was taken by withdraw
    shutil.rmtree(pathlib.Path(spec.cwd))  # its job deleted: the files go, no claim stays
    (rig.root / "go-w").touch()
    assert wait_status(ex, before).exit_code == 0
    time.sleep(0.3)
    assert not (rig.root / "start-x").exists()
    assert ex.recover(spec).state is base.State.NOT_STARTED


def test_a_follow_on_launch_carried_out_cannot_be_withdrawn(rig: Rig) -> None:
    ex = rig.executor()
    before = rig.launch(ex, rig.spec("pass"))
    spec = rig.spec(ready_then_wait("y"))
    started = ex.follow(spec, before.launch_id)
    factories.wait_for((rig.root / "ready-y").exists, what="the follow-on to start")

    assert ex.withdraw(spec) is False  # it runs: the scheduler records it instead
    handle = started()
    rig.handles.append(handle)
    assert handle.pid == int((rig.root / "ready-y").read_text())
    (rig.root / "go-y").touch()
    assert wait_status(ex, handle).exit_code == 0


def test_follow_on_launches_go_with_the_server_that_asked(rig: Rig) -> None:
    """A launcher whose server stopped drops what it holds: the next server settles such a
    launch as never started (its claim was never made) instead of finding it run."""
    ex = rig.executor()
    before = rig.launch(ex, rig.spec(ready_then_wait("z")))
    factories.wait_for((rig.root / "ready-z").exists, what="the first task to start")
    spec = rig.spec(STAMPED.format(tag="v"))
    ex.follow(spec, before.launch_id)
    ex.close()  # the launcher outlives it while its task runs

    (rig.root / "go-z").touch()
    factories.wait_for(lambda: not factories.alive(before.pid), what="the first task to end")
    time.sleep(0.3)
    assert not (rig.root / "start-v").exists()
    assert rig.executor().recover(spec).state is base.State.NOT_STARTED


def test_a_follow_on_of_a_held_launch_waits_for_that_one_to_run_and_end(rig: Rig) -> None:
    ex = rig.executor()
    first = rig.launch(ex, rig.spec(ready_then_wait("p")))
    factories.wait_for((rig.root / "ready-p").exists, what="the first task to start")
    middle = rig.spec(ready_then_wait("q"))
    held = ex.follow(middle, first.launch_id)
    last = ex.follow(rig.spec(STAMPED.format(tag="r")), middle.launch_id)
    assert ex.can_follow(middle.launch_id)  # sent: what follows it waits in the launcher

    (rig.root / "go-p").touch()
    factories.wait_for((rig.root / "ready-q").exists, what="the second task to start")
    held.due()
    handle = held()
    rig.handles.append(handle)
    time.sleep(0.3)
    assert not (rig.root / "start-r").exists()  # the second still runs

    (rig.root / "go-q").touch()
    factories.wait_for((rig.root / "start-r").exists, what="the third task to start")
    last.due()
    rig.handles.append(last())


def test_a_follow_on_of_a_launch_that_failed_starts_at_once(rig: Rig) -> None:
    ex = rig.executor()
    rig.launch(ex, rig.spec("pass"))  # the launcher runs
    launcher = ex._launcher
    assert launcher is not None
    os.kill(launcher.proc.pid, signal.SIGSTOP)  # both requests reach it before either runs
    try:
        bad = dataclasses.replace(rig.spec("pass"), argv=("/nonexistent/python",))
        failed = ex.begin_launch(bad)
        started = ex.follow(rig.spec(STAMPED.format(tag="f")), bad.launch_id)
    finally:
        os.kill(launcher.proc.pid, signal.SIGCONT)

    with pytest.raises(errors.LaunchError, match="nonexistent"):
        failed()
    factories.wait_for((rig.root / "start-f").exists, what="the follow-on to start")
    started.due()
    rig.handles.append(started())


def test_a_follow_on_launch_whose_directory_is_gone_never_runs(rig: Rig) -> None:
    """Its directories are made before it is sent: gone when it is due, its job was
    deleted, and nothing of it is started (nor its directories made again)."""
    ex = rig.executor()
    before = rig.launch(ex, rig.spec(ready_then_wait("k")))
    factories.wait_for((rig.root / "ready-k").exists, what="the first task to start")
    spec = rig.spec(STAMPED.format(tag="gone"))
    started = ex.follow(spec, before.launch_id)
    shutil.rmtree(pathlib.Path(spec.cwd))

    (rig.root / "go-k").touch()
    assert wait_status(ex, before).exit_code == 0
    started.due()
    with pytest.raises(errors.LaunchError, match="directory is gone"):
        started()
    assert not (rig.root / "start-gone").exists()
    assert not pathlib.Path(spec.cwd).exists()
