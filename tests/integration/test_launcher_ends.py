"""The local launcher tells a task's end as soon as the task's keeper has recorded it in
the claim (the keeper then says it on the pipe it answered on and closes it), not once the
keeper's process has gone: a keeper's exit (its address space torn down, the launcher woken
by SIGCHLD) took more than a millisecond of every job's path here. It tells the end the
keeper said, without reading the claim again; from a keeper killed between recording and
saying it, the end its claim records. A keeper that dies without recording an end is told
as `-`."""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import resource
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import psutil
import pytest

from corral.executors.local import launcher
from tests import factories

#: a launcher (launcher.main, as the server runs it) whose keepers are stand-ins: each
#: answers (after `answer_after` seconds), records exit code 7 (after `end_after` more)
#: unless told to die first, and stays alive `linger` seconds
LAUNCHER = r"""
import json, os, signal, sys, time
from corral.executors.local import keeper, launcher

def stand_in(request_fd, answer_fd, _launcher):
    req = keeper.read_request(request_fd)
    if req is None:  # forked ahead, and the launcher took no more requests
        os._exit(0)
    me = os.getpid()
    time.sleep(req.get("answer_after", 0))
    os.write(answer_fd, json.dumps({"pid": me, "ticks": 0.0, "keeper": me}).encode() + b"\n")
    if req.get("die"):
        os.kill(me, signal.SIGKILL)
    time.sleep(req.get("end_after", 0))
    if "say" in req:  # said on the pipe (as a keeper does once the claim records it)
        os.write(answer_fd, json.dumps(req["say"]).encode())
    else:  # recorded in the claim only (a keeper killed before it said it)
        with open(req["prefix"] + ".claim", "w") as fh:
            fh.write(f"L {me} 0\n{me}\n" + req.get("end", "7\n"))
    os.close(answer_fd)
    time.sleep(req["linger"])
    os._exit(0)

keeper.run = stand_in
sys.exit(launcher.main(int(sys.argv[1])))
"""


@contextlib.contextmanager
def _launcher(*, stand_ins: bool = True, keepers: set[int] | None = None,
              open_files: int | None = None) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """A launcher (whose keepers are stand-ins, or the real one) and the read end of its
    exit pipe; on the way out the pipe is closed and the launcher killed, with `keepers`
    (filled in meanwhile). `open_files`: its soft limit of open files."""
    exit_r, exit_w = os.pipe()
    code = ["-c", LAUNCHER] if stand_ins else ["-I", "-S", launcher.__file__]
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    proc = subprocess.Popen(
        [sys.executable, *code, str(exit_w)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        pass_fds=(exit_w,), preexec_fn=None if open_files is None else (
            lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, hard))))
    os.close(exit_w)
    try:
        yield proc, exit_r
    finally:
        os.close(exit_r)
        for pid in keepers or ():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        proc.kill()
        proc.wait()


def _launch(tmp_path: pathlib.Path, req: dict[str, object]) -> tuple[str, int]:
    """Start a launcher, send it `req`: (what its exit pipe said within 10 s, the keeper)."""
    with _launcher() as (proc, exit_r):
        keeper = int(_request(proc, tmp_path, req)["pid"])
        told = b""
        if select.select([exit_r], [], [], 10)[0]:
            told = os.read(exit_r, 100)
        return told.decode(), keeper


def test_an_end_is_told_once_recorded_while_the_keeper_still_lives(
        tmp_path: pathlib.Path) -> None:
    told, keeper = _launch(tmp_path, {"id": "L1", "linger": 30})
    try:
        assert told == 'L1 {"code":7}\n'
        assert psutil.pid_exists(keeper) and psutil.Process(keeper).status() != "zombie"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(keeper, signal.SIGKILL)


def test_an_end_is_told_while_another_keeper_is_still_starting_its_task(
        tmp_path: pathlib.Path) -> None:
    """The launcher passes a keeper's answer on when it comes, and tells ends meanwhile:
    one that waited for a starting keeper's answer told the ends it saw only after it."""
    keepers: set[int] = set()
    with _launcher(keepers=keepers) as (proc, exit_r):
        assert proc.stdout is not None
        keepers.add(int(_request(proc, tmp_path, {"id": "A", "end_after": 1.0, "linger": 0}
                                 )["pid"]))
        _send(proc, tmp_path, {"id": "B", "answer_after": 8.0, "linger": 0})
        # A's end comes a second after its answer, B's answer eight seconds after its request
        assert select.select([exit_r], [], [], 5)[0], "A's end was not told while B started"
        assert os.read(exit_r, 100) == b'A {"code":7}\n'
        answer = json.loads(proc.stdout.readline())  # and B's answer comes all the same
        assert answer["id"] == "B" and "pid" in answer
        keepers.add(int(answer["pid"]))
        assert select.select([exit_r], [], [], 10)[0]
        assert os.read(exit_r, 100) == b'B {"code":7}\n'


def test_the_end_a_keeper_says_is_told_without_reading_its_claim(
        tmp_path: pathlib.Path) -> None:
    """What a keeper says on its pipe (its end, once recorded) is told as it is: this one
    wrote no claim at all, so the launcher did not read one."""
    said = {"code": 137, "oom_kills": 2, "memory_mb": 512, "log_dropped": 0}
    told, _keeper = _launch(tmp_path, {"id": "L4", "linger": 0, "say": said})
    assert told == "L4 " + json.dumps(said, separators=(",", ":")) + "\n"
    assert not (tmp_path / "L4.claim").exists()


def test_the_end_a_claim_records_is_told_for_a_keeper_killed_before_saying_it(
        tmp_path: pathlib.Path) -> None:
    told, _keeper = _launch(tmp_path, {"id": "L5", "linger": 0,
                                       "end": 'E {"log_dropped": 4096}\n1\n'})
    assert told == 'L5 {"code":1,"log_dropped":4096}\n'


def test_a_keeper_killed_before_recording_an_end_is_told_without_a_code(
        tmp_path: pathlib.Path) -> None:
    told, _keeper = _launch(tmp_path, {"id": "L2", "linger": 0, "die": True})
    assert told == "L2 -\n"


def test_the_launcher_holds_a_pipe_a_task_with_room_for_them_and_tasks_keep_the_limit(
        tmp_path: pathlib.Path) -> None:
    """The launcher holds each running task's answer pipe: it raises its soft limit of open
    files to the hard one (a soft 1024 would refuse the thousandth task), and its keepers
    give their tasks the limit the launcher was started with."""
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard <= 512:
        pytest.skip("the hard limit of open files is too low to tell the two apart")
    with _launcher(stand_ins=False, open_files=512) as (proc, exit_r):
        answer = _request(proc, tmp_path, {
            "id": "L3", "prefix": str(tmp_path / "ctl" / "L3"), "argv": ["ulimit -n"],
            "shell": True, "cwd": str(tmp_path), "env": {"PATH": os.environ["PATH"]},
            "log": str(tmp_path / "logs" / "L3.log"), "task": "worker-0"})
        assert "pid" in answer
        assert select.select([exit_r], [], [], 10)[0]
        assert os.read(exit_r, 100) == b'L3 {"code":0}\n'
        assert (tmp_path / "logs" / "L3.log").read_text().strip() == "512"
        assert psutil.Process(proc.pid).rlimit(psutil.RLIMIT_NOFILE)[0] > 512


def _ready_keeper(launcher_pid: int, known: set[int], within: float = 10.0) -> int:
    """The launcher's child that is none of `known`: the keeper it forked ahead."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        new = {c.pid for c in psutil.Process(launcher_pid).children()} - known
        if new:
            return new.pop()
        time.sleep(0.02)
    raise AssertionError("the launcher forked no keeper ahead")


def _send(proc: subprocess.Popen[bytes], tmp_path: pathlib.Path,
          req: dict[str, object]) -> None:
    """Write launch request `req` to the launcher (its `prefix` under `tmp_path` unless it
    names one)."""
    assert proc.stdin is not None
    proc.stdin.write(json.dumps({"prefix": str(tmp_path / str(req["id"])), **req}).encode()
                     + b"\n")
    proc.stdin.flush()


def _request(proc: subprocess.Popen[bytes], tmp_path: pathlib.Path,
             req: dict[str, object]) -> dict[str, Any]:
    """`_send`, then the launcher's answer."""
    _send(proc, tmp_path, req)
    assert proc.stdout is not None
    answer: dict[str, Any] = json.loads(proc.stdout.readline())
    return answer


def test_a_launch_is_handed_to_a_keeper_forked_before_it_came(
        tmp_path: pathlib.Path) -> None:
    """A launch does not wait for a fork of the launcher: the keeper that keeps it was
    forked ahead (once no keeper was starting a task), ready and waiting."""
    kept: set[int] = set()
    with _launcher(keepers=kept) as (proc, _exit_r):
        for launch in ("A", "B"):
            ready = _ready_keeper(proc.pid, kept)
            answer = _request(proc, tmp_path, {"id": launch, "linger": 30})
            assert answer["pid"] == ready
            kept.add(ready)
        # A ready keeper that died before its launch came: the launch gets one forked
        # then (none is forked ahead again until a launch came: one that cannot get
        # ready must not be forked again and again), and after it, one ahead again.
        dead = _ready_keeper(proc.pid, kept)
        os.kill(dead, signal.SIGKILL)
        factories.wait_for(lambda: dead not in {c.pid for c in psutil.Process(proc.pid)
                                                .children()}, what="the dead keeper reaped")
        time.sleep(0.2)
        assert {c.pid for c in psutil.Process(proc.pid).children()} == kept
        answer = _request(proc, tmp_path, {"id": "C", "linger": 30})
        assert isinstance(answer["pid"], int) and answer["pid"] not in kept | {dead}
        kept.add(answer["pid"])
        kept.add(_ready_keeper(proc.pid, kept))


def test_the_keeper_forked_ahead_exits_once_the_launcher_takes_no_more_requests(
        tmp_path: pathlib.Path) -> None:
    """Its server gone (stdin closed), the launcher tells its ready keeper that no launch
    comes: the keeper exits without claiming anything, and the launcher with it."""
    with _launcher(stand_ins=False) as (proc, _exit_r):
        ready = _ready_keeper(proc.pid, set())
        assert proc.stdin is not None
        proc.stdin.close()
        assert proc.wait(timeout=10) == 0
        assert not psutil.pid_exists(ready) or psutil.Process(ready).status() == "zombie"
