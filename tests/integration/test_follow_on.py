"""Follow-on launches through a live server: a queued job is handed to the launcher ahead
and starts the moment the task before it ends (real processes, one core)."""

from __future__ import annotations

import itertools
import pathlib
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from corral.scheduler import reconciler
from corral.store import repo
from tests import conftest, factories

Live = conftest.Live

# Appends "start <tag> <ns>" to $LOG, waits for $GATE/go-<tag> when $GATE is set, else
# sleeps $NAP seconds, then appends "end <tag> <ns>".
STAMP = """
import os, pathlib, sys, time
tag, log = os.environ["TAG"], pathlib.Path(os.environ["LOG"])
def note(word):
    with open(log, "a") as fh:
        fh.write(f"{word} {tag} {time.monotonic_ns()}\\n")
note("start")
gate = os.environ.get("GATE")
if gate:
    while not pathlib.Path(gate, f"go-{tag}").exists():
        time.sleep(0.02)
else:
    time.sleep(float(os.environ.get("NAP", "0")))
note("end")
"""


@pytest.fixture
def one_core(tmp_path: pathlib.Path) -> Iterator[Live]:
    live = conftest.start_live(tmp_path / "home", cpus=1)
    yield live
    conftest.stop_live(live)


@pytest.fixture
def script(tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / "stamp.py"
    path.write_text(STAMP)
    return path


def stamp_job(tmp_path: pathlib.Path, script: pathlib.Path, tag: str, *, gated: bool = False,
              nap: float = 0.0, **overrides: Any) -> dict[str, Any]:
    """A command job (no code to copy: one that can be launched ahead)."""
    env = {"TAG": tag, "LOG": str(tmp_path / "stamps"), "NAP": str(nap)}
    if gated:
        env["GATE"] = str(tmp_path)
    return factories.make_job(name=tag, command=f"{sys.executable} {script}",
                              environments=env, **overrides)


def stamps(tmp_path: pathlib.Path) -> dict[str, dict[str, list[int]]]:
    """tag -> {"start": [ns...], "end": [ns...]}"""
    out: dict[str, dict[str, list[int]]] = {}
    path = tmp_path / "stamps"
    for line in path.read_text().splitlines() if path.exists() else ():
        word, tag, ns = line.split()
        out.setdefault(tag, {"start": [], "end": []})[word].append(int(ns))
    return out


def held_launch(live: Live, job_id: str) -> Any:
    """The task row of a job handed to the launcher ahead: the job still Pending, its
    attempt's task written as launching; None while there is none."""
    with live.embedded.platform.store.read() as conn:
        job = repo.job_by_id(conn, job_id)
        tasks = repo.tasks_of(conn, job_id, 1)
    if job is None or job.phase != "Pending" or not tasks:
        return None
    return tasks[0] if tasks[0].state == "launching" else None


def messages(live: Live, job_id: str) -> list[str]:
    r = live.http.get(live.path(f"/training-jobs/{job_id}/events"), params={"limit": 100})
    assert r.status_code == 200, r.text
    return [e["message"] for e in r.json()["events"]]


def test_queued_jobs_take_a_freed_core_at_once_and_never_overlap(
        one_core: Live, tmp_path: pathlib.Path, script: pathlib.Path) -> None:
    ids = [one_core.submit(stamp_job(tmp_path, script, f"j{i}", nap=0.2))["metadata"]["id"]
           for i in range(4)]

    jobs = [one_core.wait(job_id) for job_id in ids]

    assert [j["status"]["phase"] for j in jobs] == ["Completed"] * 4
    runs = sorted((s["start"][0], s["end"][0]) for s in stamps(tmp_path).values())
    assert len(runs) == 4
    for (_, end), (start, _) in itertools.pairwise(runs):
        assert start >= end  # one core: one task at a time, whoever started it
    followed = [job_id for job_id in ids
                if any("as a task there ended" in m for m in messages(one_core, job_id))]
    assert followed, "no job was launched ahead"
    for job_id in followed:
        job = one_core.job(job_id)
        assert [r["start_type"] for r in job["status"]["running_records"]] == [
            "init_or_rescheduled"]
        assert job["status"]["task_statuses"][0]["exit_code"] == 0


def launched_ahead(live: Live, tmp_path: pathlib.Path, script: pathlib.Path,
                   tag: str) -> tuple[str, str]:
    """Job "a" holds the core until released (go-a); job `tag` is handed to the launcher
    to start when "a" ends. Returns both ids."""
    first = live.submit(stamp_job(tmp_path, script, "a", gated=True))["metadata"]["id"]
    factories.wait_for(lambda: "a" in stamps(tmp_path), what="the first job to start")
    second = live.submit(stamp_job(tmp_path, script, tag))["metadata"]["id"]
    factories.wait_for(lambda: held_launch(live, second), what=f"{tag} to be launched ahead")
    return first, second


def test_a_job_stopped_while_launched_ahead_never_runs(
        one_core: Live, tmp_path: pathlib.Path, script: pathlib.Path) -> None:
    first, second = launched_ahead(one_core, tmp_path, script, "b")

    r = one_core.http.post(one_core.path(f"/training-jobs/{second}/actions"),
                           json={"action_type": "terminate"})
    assert r.status_code == 202, r.text
    assert one_core.wait(second)["status"]["phase"] == "Terminated"
    (tmp_path / "go-a").touch()
    assert one_core.wait(first)["status"]["phase"] == "Completed"

    time.sleep(0.5)
    assert "b" not in stamps(tmp_path)
    job = one_core.job(second)
    assert job["status"]["running_records"] == []
    with one_core.embedded.platform.store.read() as conn:
        assert repo.tasks_of(conn, second, 1) == []


def test_a_job_of_higher_priority_takes_the_place_of_one_launched_ahead(
        one_core: Live, tmp_path: pathlib.Path, script: pathlib.Path) -> None:
    first, low = launched_ahead(one_core, tmp_path, script, "low")
    was = held_launch(one_core, low).launch_id
    high = one_core.submit(stamp_job(
        tmp_path, script, "high", spec={"resource": {"flavor_id": "corral.cpu.1u",
                                                     "node_count": 1},
                                        "schedule_policy": {"priority": 3}}))["metadata"]["id"]

    def high_first() -> bool:  # low taken back; handed out again behind high, or not
        high_task, low_task = held_launch(one_core, high), held_launch(one_core, low)
        return bool(high_task) and (low_task is None or low_task.launch_id != was)

    factories.wait_for(high_first, what="high to take low's place")
    (tmp_path / "go-a").touch()

    assert one_core.wait(first)["status"]["phase"] == "Completed"
    assert one_core.wait(high)["status"]["phase"] == "Completed"
    assert one_core.wait(low)["status"]["phase"] == "Completed"
    runs = stamps(tmp_path)
    assert runs["a"]["end"][0] <= runs["high"]["start"][0] <= runs["low"]["start"][0]
    assert [len(runs[t]["start"]) for t in ("a", "high", "low")] == [1, 1, 1]


def test_a_job_that_may_restart_in_place_keeps_its_core_from_the_next(
        one_core: Live, tmp_path: pathlib.Path, script: pathlib.Path) -> None:
    """A job with retries keeps its room between a failed attempt and its restart: nothing
    may be launched to start when its task ends."""
    flaky = tmp_path / "flaky.py"
    flaky.write_text(STAMP + 'sys.exit(3 if os.environ["CORRAL_ATTEMPT"] == "1" else 0)\n')
    first = one_core.submit(factories.make_job(
        name="flaky", command=f"{sys.executable} {flaky}", retries=1,
        environments={"TAG": "f", "LOG": str(tmp_path / "stamps"), "NAP": "0.3"},
    ))["metadata"]["id"]
    factories.wait_for(lambda: "f" in stamps(tmp_path), what="the flaky job to start")
    later = [one_core.submit(stamp_job(tmp_path, script, f"n{i}", nap=0.1))["metadata"]["id"]
             for i in range(2)]

    job = one_core.wait(first)
    assert job["status"]["phase"] == "Completed"
    assert [r["end_reason"] for r in job["status"]["running_records"]] == [
        "exit with 3", "job completed"]
    assert [one_core.wait(j)["status"]["phase"] for j in later] == ["Completed"] * 2
    runs = sorted((start, end) for s in stamps(tmp_path).values()
                  for start, end in zip(s["start"], s["end"], strict=True))
    assert len(runs) == 4  # two attempts of the flaky job, one run of each other
    for (_, end), (start, _) in itertools.pairwise(runs):
        assert start >= end


def test_a_preemption_takes_the_room_not_the_job_launched_ahead(
        one_core: Live, tmp_path: pathlib.Path, script: pathlib.Path) -> None:
    """A job handed out behind a task that is then preempted is taken back: the room the
    victim leaves is the preempting job's."""
    def policy(priority: int, preemptible: bool = False) -> dict[str, Any]:
        return {"resource": {"flavor_id": "corral.cpu.1u", "node_count": 1},
                "schedule_policy": {"priority": priority, "preemptible": preemptible}}

    victim = one_core.submit(stamp_job(tmp_path, script, "v", gated=True,
                                       spec=policy(1, preemptible=True)))["metadata"]["id"]
    factories.wait_for(lambda: "v" in stamps(tmp_path), what="the victim to start")
    waiting = one_core.submit(stamp_job(tmp_path, script, "w"))["metadata"]["id"]
    factories.wait_for(lambda: held_launch(one_core, waiting), what="w to be launched ahead")

    urgent = one_core.submit(stamp_job(tmp_path, script, "u", spec=policy(3)))["metadata"]["id"]

    assert one_core.wait(urgent)["status"]["phase"] == "Completed"
    (tmp_path / "go-v").touch()  # requeued: its next run ends at once
    assert one_core.wait(waiting)["status"]["phase"] == "Completed"
    assert one_core.wait(victim)["status"]["phase"] == "Completed"
    runs = stamps(tmp_path)
    assert len(runs["v"]["start"]) == 2  # preempted, then run again from the queue
    assert runs["u"]["start"][0] <= runs["w"]["start"][0]
    assert len(runs["w"]["start"]) == 1


def chain(live: Live) -> dict[str, str]:
    """The follow-on launches held, as launch id followed -> job id (from the server's
    own record of what it handed out)."""
    follow = live.embedded.platform.reconciler._follow
    return {fo.after: job_id for job_id, fo in dict(follow).items()}


def test_jobs_are_handed_out_several_deep_and_run_one_after_another(
        one_core: Live, tmp_path: pathlib.Path, script: pathlib.Path) -> None:
    """Behind one running task, the next jobs are handed out each behind the one before
    (FOLLOW_DEPTH of them); they run in queue order, one at a time, each once."""
    first = one_core.submit(stamp_job(tmp_path, script, "a", gated=True))["metadata"]["id"]
    factories.wait_for(lambda: "a" in stamps(tmp_path), what="the first job to start")
    tags = [f"n{i}" for i in range(reconciler.FOLLOW_DEPTH + 1)]
    ids = [one_core.submit(stamp_job(tmp_path, script, tag, nap=0.1))["metadata"]["id"]
           for tag in tags]
    deep = ids[:reconciler.FOLLOW_DEPTH]
    factories.wait_for(lambda: all(held_launch(one_core, j) for j in deep),
                       what="three jobs to be handed out")
    links = chain(one_core)
    assert len(links) == reconciler.FOLLOW_DEPTH
    # Each behind the one before it: the first behind a's task, the next behind its task.
    with one_core.embedded.platform.store.read() as conn:
        a_task = repo.tasks_of(conn, first, 1)[0]
    assert links[a_task.launch_id] == deep[0]
    for before, job_id in itertools.pairwise(deep):
        assert links[held_launch(one_core, before).launch_id] == job_id
    assert held_launch(one_core, ids[-1]) is None  # deeper than FOLLOW_DEPTH: waits

    (tmp_path / "go-a").touch()
    assert [one_core.wait(j)["status"]["phase"] for j in [first, *ids]] == ["Completed"] * 5
    runs = stamps(tmp_path)
    order = sorted((runs[t]["start"][0], runs[t]["end"][0], t) for t in ["a", *tags])
    assert [t for _s, _e, t in order] == ["a", *tags]
    assert [len(runs[t]["start"]) for t in ["a", *tags]] == [1] * 5
    for (_s1, end, _t1), (start, _e2, _t2) in itertools.pairwise(order):
        assert start >= end


def test_a_job_stopped_in_the_middle_of_a_chain_never_runs_nor_lets_the_next_in_early(
        one_core: Live, tmp_path: pathlib.Path, script: pathlib.Path) -> None:
    """Taking back a launch that another one follows takes that one back first: held
    behind a launch withdrawn, it would start at once, beside the task still running."""
    first = one_core.submit(stamp_job(tmp_path, script, "a", gated=True))["metadata"]["id"]
    factories.wait_for(lambda: "a" in stamps(tmp_path), what="the first job to start")
    ids = [one_core.submit(stamp_job(tmp_path, script, tag))["metadata"]["id"]
           for tag in ("b", "c", "d")]
    factories.wait_for(lambda: all(held_launch(one_core, j) for j in ids),
                       what="b, c and d to be handed out")

    r = one_core.http.post(one_core.path(f"/training-jobs/{ids[1]}/actions"),
                           json={"action_type": "terminate"})
    assert r.status_code == 202, r.text
    assert one_core.wait(ids[1])["status"]["phase"] == "Terminated"
    time.sleep(0.5)  # d, let in early, would have run by now
    assert set(stamps(tmp_path)) == {"a"}
    factories.wait_for(lambda: held_launch(one_core, ids[2]), what="d to be handed out again")

    (tmp_path / "go-a").touch()
    assert one_core.wait(first)["status"]["phase"] == "Completed"
    assert one_core.wait(ids[0])["status"]["phase"] == "Completed"
    assert one_core.wait(ids[2])["status"]["phase"] == "Completed"
    runs = stamps(tmp_path)
    assert "c" not in runs
    assert runs["a"]["end"][0] <= runs["b"]["start"][0]
    assert runs["b"]["end"][0] <= runs["d"]["start"][0]
    assert one_core.job(ids[1])["status"]["running_records"] == []


def test_a_job_that_ran_and_ended_between_two_passes_is_seen_ending_at_once(
        tmp_path: pathlib.Path, script: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A job handed out ahead can start and end while the scheduler waits between passes:
    both exits woke it before the pass that records the start, so that pass must see the
    end too (nothing else wakes it until the timer, here a minute away)."""
    monkeypatch.setattr(reconciler, "FOLLOW_PACE_S", 1.0)  # (room for both to run)
    live = conftest.start_live(tmp_path / "home", cpus=1, tick_interval=60.0)
    try:
        first, second = launched_ahead(live, tmp_path, script, "b")
        (tmp_path / "go-a").touch()
        factories.wait_for(lambda: stamps(tmp_path).get("b", {}).get("end"), timeout=10,
                           what="b to run")
        assert live.wait(second, timeout=10)["status"]["phase"] == "Completed"
        assert live.wait(first, timeout=10)["status"]["phase"] == "Completed"
    finally:
        conftest.stop_live(live)
