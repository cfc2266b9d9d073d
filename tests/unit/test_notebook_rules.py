"""The rules of notebooks: the status a user sees, leases, durations."""

from __future__ import annotations

import pytest

from corral.domain import errors, notebooks

State, Status = notebooks.State, notebooks.Status


@pytest.mark.parametrize(("state", "session", "ready", "status"), [
    (State.STARTING, 1, False, Status.CREATING),
    (State.STARTING, 2, False, Status.STARTING),
    (State.RUNNING, 1, True, Status.RUNNING),
    (State.STOPPING, 3, True, Status.STOPPING),
    (State.STOPPED, 3, True, Status.STOPPED),
    (State.FAILED, 1, False, Status.CREATE_FAILED),
    (State.FAILED, 2, False, Status.START_FAILED),
    (State.FAILED, 2, True, Status.ERROR),
    (State.DELETING, 1, True, Status.DELETING),
])
def test_the_status_shown_comes_from_the_state_and_the_session(
        state: State, session: int, ready: bool, status: Status) -> None:
    assert notebooks.status(state, session=session, ready=ready) is status


def test_a_timing_lease_ends_at_stops_at() -> None:
    stop = notebooks.lease_stop
    assert stop("timing", 1000, now=999, stops_at=1000, last_active=None, busy=False) is None
    assert stop("timing", 1000, now=1000, stops_at=1000, last_active=None,
                busy=True) == "lease expired"


def test_an_idle_lease_ends_after_its_duration_of_nothing_but_never_while_busy() -> None:
    stop = notebooks.lease_stop
    hour = 3_600_000
    assert stop("idle", hour, now=hour - 1, stops_at=None, last_active=0, busy=False) is None
    assert stop("idle", hour, now=hour, stops_at=None, last_active=0,
                busy=False) == "idle for 60 min"
    assert stop("idle", hour, now=10 * hour, stops_at=None, last_active=0, busy=True) is None
    assert notebooks.idle_since(5, None, 9, 7) == 9


def test_a_starting_session_says_which_step_it_is_at() -> None:
    queued = notebooks.progress("starting", "Pending", "quota")
    placed = notebooks.progress("starting", "Running", None)
    assert [s["status"] for s in queued] == ["COMPLETED", "PROCESSING", "WAITING", "WAITING"]
    assert queued[1]["description"].endswith(": quota")
    assert [s["status"] for s in placed] == ["COMPLETED"] * 3 + ["PROCESSING"]
    assert notebooks.progress("running", "Running", None) == []


@pytest.mark.parametrize(("text", "ms"), [("4h", 14_400_000), ("90m", 5_400_000),
                                          ("2h30m", 9_000_000), ("45s", 45_000),
                                          ("10", 10_000), ("1.5h", 5_400_000)])
def test_durations_are_read_as_people_write_them(text: str, ms: int) -> None:
    assert notebooks.parse_duration(text) == ms


@pytest.mark.parametrize("text", ["", "soon", "4x", "0", "h", "-1h"])
def test_a_duration_that_is_none_is_refused(text: str) -> None:
    with pytest.raises(errors.BadParameter):
        notebooks.parse_duration(text)


def test_a_lease_of_a_request_defaults_as_modelarts_has_it() -> None:
    defaults = {"default_ms": 4, "default_idle_ms": 6}
    assert notebooks.lease_of(None, None, **defaults) == ("timing", 4)
    assert notebooks.lease_of(notebooks.LeaseReq(type="idle"), None, **defaults) == ("idle", 6)
    assert notebooks.lease_of(notebooks.LeaseReq(type="idle", duration=2000), 7000,
                              **defaults) == ("timing", 7000)


def test_a_dedicated_workspace_is_an_absolute_folder() -> None:
    with pytest.raises(ValueError, match="absolute"):
        notebooks.VolumeReq(ownership="DEDICATED", uri="relative/dir")
    with pytest.raises(ValueError, match="needs `uri`"):
        notebooks.VolumeReq(ownership="DEDICATED")
