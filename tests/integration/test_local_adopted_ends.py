"""An adopted task whose keeper records its exit code and exits while the server reads its
claim: its end is read, never taken for a lost task (real processes; the keeper is held
stopped, and let go at the moment each test names, so the window is hit every time)."""

from __future__ import annotations

import os
import pathlib
import signal
from collections.abc import Callable, Iterator

import pytest

from corral.executors import base
from corral.executors.local import claims, processes
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
    factories.wait_for(lambda: processes.start_ticks(handle.pid) is None, what="the task")
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
