"""A task's log is kept within its cap: its head as it comes, its tail when the task ends,
the dropped middle said in the log and in the task's end; its bytes never move."""

from __future__ import annotations

import pathlib
import re
from collections.abc import Iterator

import pytest

from corral.executors import base
from tests import factories
from tests.integration import local_rig

MB = 2**20
#: numbered lines of 100 bytes, as fast as Python writes them
LINES = """
    import os, pathlib, sys
    root = pathlib.Path(os.environ["ROOT"])
    def write(first, last):
        out = sys.stdout.buffer
        for i in range(first, last):
            out.write(b"line %08d " % i + b"x" * 85 + b"\\n")
        out.flush()
    write(0, {first})
    (root / "halfway").touch()
    while {wait} and not (root / "go").exists():
        pass
    write({first}, {last})
"""


@pytest.fixture
def rig(tmp_path: pathlib.Path) -> Iterator[local_rig.Rig]:
    with local_rig.rigged(tmp_path) as r:
        yield r


def expected(lines: int) -> bytes:
    return b"".join(b"line %08d " % i + b"x" * 85 + b"\n" for i in range(lines))


def test_a_log_over_its_cap_keeps_its_head_and_its_tail(rig: local_rig.Rig) -> None:
    ex = rig.executor(log_max_mb=1)
    spec = rig.spec(LINES.format(first=30_000, last=60_000, wait=False))  # 6 MB

    status = local_rig.wait_status(ex, rig.launch(ex, spec))

    assert (status.state, status.exit_code) == (base.State.EXITED, 0)
    log = pathlib.Path(spec.log_path).read_bytes()
    assert MB < len(log) <= MB + 512  # the cap, and two lines saying so
    whole = expected(60_000)
    assert log.startswith(whole[:MB // 2])  # the head, as it came
    head_note, tail_note = (line for line in log.split(b"\n") if line.startswith(b"[corral]"))
    assert b"held back" in head_note
    assert b"MB of worker-0's log dropped here" in tail_note
    tail = log.split(tail_note + b"\n", 1)[1]
    assert tail.startswith(b"line ") and whole.endswith(tail)  # whole lines, up to the last
    assert len(tail) > MB // 2 - 200
    assert status.log_dropped == len(whole) - MB // 2 - len(tail)


def test_a_log_that_only_reached_its_head_is_kept_whole(rig: local_rig.Rig) -> None:
    ex = rig.executor(log_max_mb=1)
    spec = rig.spec(LINES.format(first=6_000, last=8_000, wait=False))  # 800 kB

    status = local_rig.wait_status(ex, rig.launch(ex, spec))

    log = pathlib.Path(spec.log_path).read_bytes()
    assert re.sub(rb"\n\[corral\] [^\n]*\n", b"", log) == expected(8_000)
    assert b"nothing of worker-0's log was dropped" in log
    assert status.log_dropped == 0


def test_what_was_read_of_a_capped_log_never_changes(rig: local_rig.Rig) -> None:
    """`corral logs -f` reads on from an offset: the log only ever grows."""
    ex = rig.executor(log_max_mb=1)
    spec = rig.spec(LINES.format(first=20_000, last=40_000, wait=True))
    handle = rig.launch(ex, spec)
    factories.wait_for((rig.root / "halfway").exists, 20, "the first 2 MB")
    log = pathlib.Path(spec.log_path)
    factories.wait_for(lambda: log.stat().st_size > MB // 2, 10, "the head to be written")
    seen = log.read_bytes()

    (rig.root / "go").touch()
    local_rig.wait_status(ex, handle)

    assert log.read_bytes().startswith(seen)


@pytest.mark.parametrize("cap", [1, 0])
def test_a_task_has_its_log_only_when_it_is_not_capped(rig: local_rig.Rig, cap: int) -> None:
    """Capped, a task writes into a pipe (it cannot write past the cap); not, into the
    file itself."""
    ex = rig.executor(log_max_mb=cap)
    spec = rig.spec("import os; print(os.readlink('/proc/self/fd/1'))")

    local_rig.wait_status(ex, rig.launch(ex, spec))

    target = pathlib.Path(spec.log_path).read_text().strip()
    assert target.startswith("pipe:") if cap else target == spec.log_path
