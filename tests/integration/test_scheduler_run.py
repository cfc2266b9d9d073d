"""The scheduler on the real local executor: quotas hold, and a preempted process that
checkpoints on SIGTERM resumes from its checkpoint once requeued."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator
from typing import Any

import pytest

from tests import conftest, factories

Live = conftest.Live


@pytest.fixture
def live_server(tmp_path: pathlib.Path) -> Iterator[Live]:
    """Two cores whatever this machine has; a grace period long enough to checkpoint."""
    live = conftest.start_live(tmp_path / "home", cpus=2, grace_period=10.0)
    yield live
    conftest.stop_live(live)


# Counts steps; on SIGTERM saves the step it reached and exits 143. Started again with a
# checkpoint, it records where it resumed and finishes at once.
TRAIN = """
import os, pathlib, signal, sys, time
state = pathlib.Path(os.environ["STATE"])
ckpt = state / "checkpoint"
step = int(ckpt.read_text()) if ckpt.exists() else 0
attempt = os.environ["CORRAL_ATTEMPT"]
(state / f"started-{attempt}").write_text(str(step))
if step:
    (state / "resumed-from").write_text(str(step))
    sys.exit(0)
def stop(*_):
    ckpt.write_text(str(step))
    sys.exit(128 + signal.SIGTERM)
signal.signal(signal.SIGTERM, stop)
while True:
    step += 1
    (state / "progress").write_text(str(step))
    time.sleep(0.02)
"""

WAIT_FOR_GO = """
import os, pathlib, time
state = pathlib.Path(os.environ["STATE"])
(state / f"ready-{os.environ['TAG']}").write_text("1")
while not (state / f"go-{os.environ['TAG']}").exists():
    time.sleep(0.02)
"""


def job_with(tmp: pathlib.Path, source: str, flavor: str = "corral.cpu.1u", *,
             priority: int = 1, preemptible: bool = False, tag: str = "t",
             retries: int | None = None) -> dict[str, Any]:
    state = tmp / "state"
    state.mkdir(exist_ok=True)
    body = factories.make_job(code_dir=factories.write_code(tmp, source), flavor_id=flavor,
                              environments={"STATE": str(state), "TAG": tag}, retries=retries)
    body["spec"]["schedule_policy"] = {"priority": priority, "preemptible": preemptible}
    return body


def events(live: Live, job_id: str) -> list[str]:
    r = live.http.get(live.path(f"/training-jobs/{job_id}/events"), params={"limit": 100})
    assert r.status_code == 200, r.text
    return [e["message"] for e in r.json()["events"]]


def test_a_quota_holds_on_real_processes(live_server: Live, tmp_path: pathlib.Path) -> None:
    live = live_server
    r = live.http.put(live.path("/training-quotas"),
                      json={"quotas": [{"pool_id": "default", "cpu": 1}]})
    assert r.status_code == 200, r.text
    state = tmp_path / "state"
    first = live.submit(job_with(tmp_path, WAIT_FOR_GO, tag="a"))["metadata"]["id"]
    second = live.submit(job_with(tmp_path, WAIT_FOR_GO, tag="b"))["metadata"]["id"]
    factories.wait_for((state / "ready-a").exists, what="the first job to run")

    job = factories.wait_for(
        lambda: (j := live.job(second))["status"].get("queue", {}).get("wait_code")
        == "quota_exceeded" and j, what="the second job to wait for the quota")
    assert job["status"]["phase"] == "Pending"
    assert "CPU quota" in job["status"]["reason"] and "over by 1" in job["status"]["reason"]
    assert job["status"]["reason"] in events(live, second)
    assert not (state / "ready-b").exists()  # a free core, but the quota says no
    quotas = live.http.get(live.path("/training-quotas")).json()["quotas"]
    assert quotas[0]["used"]["cpu"] == 1

    (state / "go-a").write_text("")
    assert live.wait(first)["status"]["phase"] == "Completed"
    factories.wait_for((state / "ready-b").exists, what="the second job to start")
    (state / "go-b").write_text("")
    assert live.wait(second)["status"]["phase"] == "Completed"


def test_a_preempted_job_checkpoints_is_requeued_and_resumes(
        live_server: Live, tmp_path: pathlib.Path) -> None:
    live = live_server
    state = tmp_path / "state"
    victim = live.submit(job_with(tmp_path, TRAIN, "corral.cpu.full", preemptible=True,
                                  retries=0))["metadata"]["id"]
    factories.wait_for(lambda: (state / "progress").exists()
                       and int((state / "progress").read_text() or 0) > 5,
                       what="the victim to make progress")

    urgent = live.submit(job_with(tmp_path, WAIT_FOR_GO, priority=3, tag="u"))["metadata"]["id"]
    factories.wait_for((state / "ready-u").exists, timeout=60, what="the urgent job to start")
    job = live.wait(victim, {"Pending"})
    saved = int((state / "checkpoint").read_text())
    assert saved > 5
    [record] = job["status"]["running_records"]
    assert (record["end_reason"], record["end_recover"]) == ("preempted", "job_reschedule")
    assert any(m.startswith(f"Preempted for job {urgent}") for m in events(live, victim))

    (state / "go-u").write_text("")
    done = live.wait(victim, timeout=60)
    assert done["status"]["phase"] == "Completed"  # retries=0: preemption spent none
    assert int((state / "resumed-from").read_text()) == saved
    assert [r["start_type"] for r in done["status"]["running_records"]] == [
        "init_or_rescheduled", "init_or_rescheduled"]
