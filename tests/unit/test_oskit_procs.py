"""Processes found by what /proc says of them (oskit/procs.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from corral.oskit import procs

MARK, OTHER = b"CORRAL_TEST_MARK=m-1", b"CORRAL_TEST_OTHER=o-1"


@pytest.fixture
def marked() -> Iterator[subprocess.Popen[bytes]]:
    """A child process carrying MARK and OTHER in its environment."""
    env = {**os.environ, **dict(v.decode().split("=", 1) for v in (MARK, OTHER))}
    proc = subprocess.Popen([sys.executable, "-c", "print(); import time; time.sleep(60)"],
                            env=env, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    proc.stdout.readline()  # it runs: its exec is over, its environment in place
    yield proc
    proc.kill()
    proc.wait()


def test_the_environ_scan_finds_a_process_by_all_the_variables_given(
        marked: subprocess.Popen[bytes]) -> None:
    assert marked.pid in procs.carrying(MARK)
    assert marked.pid in procs.carrying(MARK, OTHER)
    assert marked.pid not in procs.carrying(MARK, b"CORRAL_TEST_OTHER=o-2")
    assert marked.pid not in procs.carrying(b"CORRAL_TEST_MARK=m-")  # whole entries only
    assert MARK in procs.environ(marked.pid)
    with pytest.raises(ValueError):
        procs.carrying()


def test_the_environ_scan_never_finds_the_process_that_scans() -> None:
    said = subprocess.run(
        [sys.executable, "-c", "import os; from corral.oskit import procs; "
         "print(os.getpid() in procs.carrying(b'CORRAL_TEST_MARK=me'))"],
        env={**os.environ, "CORRAL_TEST_MARK": "me"}, capture_output=True, text=True,
        check=True)
    assert said.stdout.strip() == "False"


def test_a_process_is_named_by_its_start_and_found_among_its_parents_children(
        marked: subprocess.Popen[bytes]) -> None:
    ticks = procs.start_ticks(marked.pid)
    assert ticks is not None and ticks >= (procs.start_ticks(os.getpid()) or 0)
    assert marked.pid in procs.children(os.getpid())
    assert any(b"time.sleep(60)" in arg for arg in procs.cmdline(marked.pid))
    marked.kill()
    marked.wait()
    assert procs.start_ticks(marked.pid) is None
    assert marked.pid not in procs.children(os.getpid())
