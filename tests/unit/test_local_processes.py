"""How the local executor tells a launch's task from any other process."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from corral.executors.local import processes


@pytest.fixture
def marked() -> Iterator[subprocess.Popen[bytes]]:
    """A process carrying the marker of launch "l-1"."""
    proc = subprocess.Popen([sys.executable, "-c", "print(); import time; time.sleep(60)"],
                            env={**os.environ, processes.LAUNCH_ENV: "l-1"},
                            stdout=subprocess.PIPE)
    assert proc.stdout is not None
    proc.stdout.readline()  # it runs: its exec is over, its environment in place
    yield proc
    proc.kill()
    proc.wait()


def test_a_process_carrying_the_launchs_marker_is_its_task(
        marked: subprocess.Popen[bytes]) -> None:
    assert processes.owned(marked.pid, "/runs/j/ctl/worker-0.l-1", "l-1")
    assert processes.owned(marked.pid, "", "l-1")
    assert marked.pid in processes.marked("l-1")


def test_another_launchs_process_is_not_its_task(marked: subprocess.Popen[bytes]) -> None:
    assert not processes.owned(marked.pid, "/runs/j/ctl/worker-0.l-2", "l-2")


def test_an_empty_prefix_or_launch_id_owns_no_process(
        marked: subprocess.Popen[bytes]) -> None:
    # Every command line ends with a NUL: split on NULs, it has an empty last field.
    assert not processes.owned(os.getpid(), "", "l-2")
    assert not processes.owned(marked.pid, "", "")
