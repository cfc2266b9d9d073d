"""Fault tolerance in the reconciler, with a fake executor and a fake clock: backoff,
rules, retry elsewhere, hangs, run time, budgets, checkpoints, and servers restarted in
the middle of each."""

from __future__ import annotations

import os
import pathlib
from collections.abc import Iterator
from typing import Any

import pytest

from corral.api import views
from corral.domain import resources
from corral.store import job_repo
from tests.unit.test_reconciler import World
from tests.unit.test_reconciler_scheduling import make_world, policy

BIG = resources.Node(name="big", cpu=4, memory_mb=16384)
SMALL = resources.Node(name="small", cpu=2, memory_mb=8192)
SPARE = resources.Node(name="spare", cpu=2, memory_mb=8192)


@pytest.fixture
def world(tmp_path: pathlib.Path) -> Iterator[World]:
    w = make_world(tmp_path)
    yield w
    w.store.dispose()


@pytest.fixture
def cluster(tmp_path: pathlib.Path) -> Iterator[World]:
    w = make_world(tmp_path, (BIG, SMALL, SPARE))
    yield w
    w.store.dispose()


def reason(w: World, job_id: str) -> str | None:
    return views.reason(w.job(job_id), None, w.now_ms())


def records(w: World, job_id: str) -> list[tuple[Any, ...]]:
    return [(a.end_reason, a.end_recover, a.failure_class) for a in w.attempts(job_id)]


def write_log(w: World, job_id: str, text: str, task: str = "worker-0") -> None:
    path = pathlib.Path(w.fake.task(job_id, task).spec.log_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    os.utime(path, (w.clock(), w.clock()))  # written now, by the fake clock


def idle_samples(w: World, job_id: str, *, attempt: int = 1, cpu: float = 0.0,
                 task: str = "worker-0") -> None:
    with w.store.begin() as conn:
        job_repo.add_samples(conn, [{
            "job_id": job_id, "attempt": attempt, "task": task, "time": w.now_ms(),
            "cpu_usage": cpu, "mem_usage": 1.0, "mem_mb": 10.0, "gpu_util": 0.0,
            "gpu_mem_usage": 0.0}])


# --- backoff ------------------------------------------------------------------------------


def test_a_restart_waits_out_its_backoff_keeping_its_slots_and_saying_why(world: World) -> None:
    job_id = world.submit(retries=2, flavor_id="corral.cpu.full")
    waiting = world.submit()
    world.tick()
    world.fake.exit(job_id, code=1)
    world.tick()

    job = world.job(job_id)
    assert (job.phase, job.restart_at) == ("Running", world.now_ms() + 5000)
    assert reason(world, job_id) == ("restarting in 5 s after worker-0 exit with 1 "
                                     "(retry 1 of 2)")
    assert records(world, job_id) == [("exit with 1", "proc_restart", "user_exit")]
    world.clock.advance(3)
    world.tick()
    assert reason(world, job_id) == ("restarting in 2 s after worker-0 exit with 1 "
                                     "(retry 1 of 2)")
    assert len(world.fake.launches(job_id)) == 1
    assert world.phase(waiting)[0] == "Pending"  # the cores are still the failed job's

    world.clock.advance(2)
    world.tick()
    assert [s.attempt for s in world.fake.launches(job_id)] == [1, 2]
    job = world.job(job_id)
    assert (job.restart_at, job.wait_reason, reason(world, job_id)) == (None, None, None)
    assert world.phase(waiting)[0] == "Pending"


def test_a_server_restarted_during_a_backoff_restarts_the_job_once_when_it_is_due(
        world: World) -> None:
    job_id = world.submit(retries=1, fault_tolerance={"backoff": {"initial": 30}})
    world.tick()
    world.fake.exit(job_id, code=1)
    world.tick()
    world.restart()
    world.tick()
    assert len(world.fake.launches(job_id)) == 1
    world.clock.advance(30)
    world.restart()
    world.tick(3)
    assert [s.attempt for s in world.fake.launches(job_id)] == [1, 2]
    assert [e for e in world.events(job_id) if e.startswith("Restarting")] == [
        "Restarting in 30 s after worker-0 exit with 1 (retry 1 of 1)"]


def test_a_job_stopped_during_its_backoff_is_never_restarted(world: World) -> None:
    job_id = world.submit(retries=1)
    world.tick()
    world.fake.exit(job_id, code=1)
    world.tick()
    world.terminate(job_id)
    world.wait_out_backoff()
    world.tick()
    job = world.job(job_id)
    assert (job.phase, job.failure_class, job.restart_at) == ("Terminated", "stopped", None)
    assert len(world.fake.launches(job_id)) == 1
    assert records(world, job_id) == [("exit with 1", None, "user_exit")]  # no restart


def test_no_backoff_restarts_in_the_same_pass(world: World) -> None:
    job_id = world.submit(retries=1, fault_tolerance={"backoff": {"initial": 0}})
    world.tick()
    world.fake.exit(job_id, code=1)
    world.tick()
    assert [s.attempt for s in world.fake.launches(job_id)] == [1, 2]
    assert "Restarting after worker-0 exit with 1 (retry 1 of 1)" in world.events(job_id)


# --- rules --------------------------------------------------------------------------------


def test_a_listed_exit_code_is_not_retried(world: World) -> None:
    job_id = world.submit(retries=3, fault_tolerance={
        "rules": [{"exit_codes": [3], "action": "no_retry"}]})
    world.tick()
    world.fake.exit(job_id, code=3)
    world.tick()
    job = world.job(job_id)
    assert (job.phase, job.failure_class, job.failure_message) == (
        "Failed", "user_exit", "worker-0: exit with 3")
    assert ("Job failed: worker-0 exit with 3 (user_exit; rule exit code 3: do not retry)"
            in world.events(job_id))
    assert records(world, job_id) == [("exit with 3", None, "user_exit")]


def test_unconditional_retry_restarts_what_a_rule_would_not(world: World) -> None:
    job_id = world.submit(retries=1, annotations={
        "fault-tolerance/job-unconditional-retry": "true"}, fault_tolerance={
        "rules": [{"exit_codes": [3], "action": "no_retry"}]})
    world.tick()
    world.fake.exit(job_id, code=3)
    world.tick()
    world.wait_out_backoff()
    assert [s.attempt for s in world.fake.launches(job_id)] == [1, 2]


def test_a_cuda_out_of_memory_line_fails_the_job_without_a_retry(world: World) -> None:
    job_id = world.submit(retries=2)
    world.tick()
    write_log(world, job_id, "epoch 1\nRuntimeError: CUDA out of memory. Tried to allocate\n")
    world.fake.exit(job_id, code=1)
    world.tick()
    job = world.job(job_id)
    assert (job.phase, job.failure_class) == ("Failed", "out_of_memory")
    assert records(world, job_id) == [("exit with 1", None, "out_of_memory")]


def test_a_matched_log_line_sends_the_job_to_another_node(cluster: World) -> None:
    w = cluster
    job_id = w.submit(retries=1, fault_tolerance={
        "rules": [{"log_contains": "ECC error", "action": "retry_elsewhere"}]})
    w.tick()
    [first] = w.tasks(job_id)
    write_log(w, job_id, "uncorrectable ECC error encountered\n")
    w.fake.exit(job_id, code=1)
    w.tick()
    assert records(w, job_id)[0] == ("exit with 1", "job_reschedule_with_taint", "user_exit")
    assert f"Job requeued: exit with 1; kept off node {first.node}" in w.events(job_id)
    assert w.job(job_id).excluded_nodes == f'["{first.node}"]'
    w.tick()
    [second] = w.tasks(job_id, 2)
    assert second.node != first.node
    # That spent its one retry: the next failure ends it.
    w.fake.exit(job_id, code=1)
    w.tick()
    assert w.phase(job_id) == ("Failed", "Failed")


# --- infrastructure faults and budgets ---------------------------------------------------


def test_a_node_lost_more_often_than_its_budget_fails_the_job(cluster: World) -> None:
    w = cluster
    job_id = w.submit(retries=5, fault_tolerance={"budgets": {"node_lost": 1}})
    w.tick()
    w.fake.lose_node(w.tasks(job_id)[0].node)
    w.tick(2)
    assert w.phase(job_id)[0] == "Running"
    w.fake.lose_node(w.tasks(job_id)[0].node)
    w.tick()
    job = w.job(job_id)
    assert (job.phase, job.failure_class) == ("Failed", "node_lost")
    assert [r[1:] for r in records(w, job_id)] == [("job_reschedule", "node_lost"),
                                                  (None, "node_lost")]


def test_a_launch_that_failed_on_a_node_that_left_spends_no_retry(cluster: World) -> None:
    w = cluster
    job_id = w.submit(retries=0)
    w.fake.launch_error = "the node's agent is gone"
    assert w.rec.tick() is True  # one pass: the failed launch is settled by the next
    [first] = w.tasks(job_id)
    assert first.state == "failed_to_start"
    w.fake.launch_error = None
    w.fake.node_list = [n for n in w.fake.node_list if n.name != first.node]
    w.tick(2)
    assert w.phase(job_id)[0] == "Running"
    assert records(w, job_id)[0] == ("failed to start: the node's agent is gone",
                                     "job_reschedule", "launch_error")
    assert w.tasks(job_id, 2)[0].node != first.node


def test_a_launch_error_on_a_node_still_there_is_the_jobs(world: World) -> None:
    job_id = world.submit(retries=0)
    world.fake.launch_error = "no such interpreter"
    world.tick(2)
    job = world.job(job_id)
    assert (job.phase, job.secondary_phase, job.failure_class) == (
        "Failed", "CreateFailed", "launch_error")


def test_a_preempted_attempt_is_recorded_as_preempted(world: World) -> None:
    victim = world.submit(spec=policy(1, True, flavor_id="corral.cpu.full"))
    world.tick()
    world.submit(spec=policy(3))
    world.tick(2)
    assert records(world, victim) == [("preempted", "job_reschedule", "preempted")]


# --- hangs --------------------------------------------------------------------------------


def test_a_silent_job_is_stopped_and_fails_hanged(world: World) -> None:
    job_id = world.submit(retries=2, fault_tolerance={"hang_timeout": 30})
    world.tick()
    for _ in range(3):
        world.clock.advance(9)
        idle_samples(world, job_id)
        world.tick()
    assert world.job(job_id).stop_cause is None  # silent for 27 s only
    world.clock.advance(4)
    idle_samples(world, job_id)
    world.tick()

    assert world.job(job_id).stop_cause == "hang"
    assert world.fake.task(job_id).signals == []  # signalled from the next pass on
    assert ("Job hung: worker-0 wrote no log for 31 s and used no CPU or GPU for 31 s "
            "(hang timeout 30 s): stopping it") in world.events(job_id)
    assert reason(world, job_id) is not None and reason(world, job_id).startswith("hung:")
    world.tick(2)
    assert world.fake.task(job_id).signals == ["SIGTERM"]
    job = world.job(job_id)
    assert (job.phase, job.failure_class, job.failure_message) == ("Failed", "hang", "hanged")
    assert records(world, job_id) == [("hanged", None, "hang")]
    assert len(world.fake.launches(job_id)) == 1  # retries left, but no hang-retry


def test_a_hung_job_with_hang_retry_restarts(world: World) -> None:
    job_id = world.submit(retries=1, annotations={"fault-tolerance/hang-retry": "true"},
                          fault_tolerance={"hang_timeout": 5, "backoff": {"initial": 0}})
    world.tick()
    world.clock.advance(6)
    idle_samples(world, job_id)
    world.tick(3)
    assert records(world, job_id) == [("hanged", "proc_restart", "hang"), (None, None, None)]
    assert "Restarting after it hanged (retry 1 of 1)" in world.events(job_id)
    assert [s.attempt for s in world.fake.launches(job_id)] == [1, 2]
    assert world.job(job_id).stop_cause is None


def test_a_busy_or_chatty_job_is_not_hung(world: World) -> None:
    busy = world.submit(fault_tolerance={"hang_timeout": 5})
    chatty = world.submit(fault_tolerance={"hang_timeout": 5})
    unsampled = world.submit(fault_tolerance={"hang_timeout": 5})
    world.tick()
    for _ in range(4):
        world.clock.advance(3)
        idle_samples(world, busy, cpu=40.0)
        idle_samples(world, chatty)
        write_log(world, chatty, "still here\n")
        world.tick()
    assert [world.job(j).stop_cause for j in (busy, chatty, unsampled)] == [None] * 3


def test_a_hang_decided_before_a_crash_is_carried_out_after_it(world: World) -> None:
    world.fake.ignore_sigterm = True
    job_id = world.submit(fault_tolerance={"hang_timeout": 5})
    world.tick()
    world.clock.advance(6)
    idle_samples(world, job_id)
    world.tick()
    world.restart()
    world.tick()
    assert world.fake.task(job_id).signals == ["SIGTERM"]
    world.restart()
    world.clock.advance(1)  # the grace period
    world.tick(2)
    assert world.fake.task(job_id).signals == ["SIGTERM", "SIGKILL"]
    assert (world.job(job_id).phase, world.job(job_id).failure_class) == ("Failed", "hang")


def test_a_stop_signalled_by_a_server_that_crashed_before_recording_it_ends_the_same(
        world: World) -> None:
    job_id = world.submit(retries=2, fault_tolerance={"max_run_time": 5})
    world.tick()
    world.clock.advance(5)
    world.tick()  # the stop is decided
    task = world.fake.task(job_id)
    world.fake.cancel(task.handle, force=False)  # sent; the server died before its record
    world.restart()
    world.tick()
    job = world.job(job_id)
    assert (job.phase, job.failure_class) == ("Failed", "timeout")
    assert len(world.fake.launches(job_id)) == 1


def test_a_stopped_task_that_exits_cleanly_on_sigterm_does_not_complete_the_job(
        world: World) -> None:
    world.fake.ignore_sigterm = True
    job_id = world.submit(fault_tolerance={"hang_timeout": 5})
    world.tick()
    world.clock.advance(6)
    idle_samples(world, job_id)
    world.tick(2)  # the stop is decided, then SIGTERM sent
    assert world.fake.task(job_id).signals == ["SIGTERM"]
    world.fake.task(job_id).exit_code = 0  # its handler saved what it could, and exited
    world.tick()
    assert (world.job(job_id).phase, world.job(job_id).failure_class) == ("Failed", "hang")


def test_a_task_that_ends_by_itself_after_a_hang_was_seen_ends_as_it_did(world: World) -> None:
    job_id = world.submit(fault_tolerance={"hang_timeout": 5})
    world.tick()
    world.clock.advance(6)
    idle_samples(world, job_id)
    world.tick()
    world.fake.exit(job_id, code=0)  # before the stop reached it
    world.tick()
    job = world.job(job_id)
    assert (job.phase, job.stop_cause, job.failure_class) == ("Completed", None, None)


# --- run time -----------------------------------------------------------------------------


def test_a_job_past_its_max_run_time_is_stopped_and_fails_timeout(world: World) -> None:
    job_id = world.submit(retries=3, fault_tolerance={"max_run_time": 60})
    world.tick()
    world.clock.advance(59)
    world.tick()
    assert world.job(job_id).stop_cause is None
    world.clock.advance(1)
    world.tick(3)
    job = world.job(job_id)
    assert (job.phase, job.failure_class) == ("Failed", "timeout")
    assert job.failure_message == "timeout: ran past its max_run_time of 60 s"
    assert "Job ran past its max_run_time of 60 s: stopping it" in world.events(job_id)
    assert world.fake.task(job_id).signals == ["SIGTERM"]
    assert len(world.fake.launches(job_id)) == 1


def test_run_time_counts_from_the_jobs_start_through_a_backoff(world: World) -> None:
    job_id = world.submit(retries=3, fault_tolerance={
        "max_run_time": 20, "backoff": {"initial": 30}})
    world.tick()
    world.clock.advance(10)
    world.fake.exit(job_id, code=1)
    world.tick()
    world.clock.advance(10)
    world.tick()
    job = world.job(job_id)
    assert (job.phase, job.failure_class) == ("Failed", "timeout")
    assert len(world.fake.launches(job_id)) == 1
    # its record closed when it failed, saying a restart would follow: none did
    assert records(world, job_id) == [("exit with 1", None, "user_exit")]


# --- checkpoints --------------------------------------------------------------------------


def test_every_attempt_is_told_where_its_checkpoints_are(world: World) -> None:
    out = str(world.tmp / "out")
    job_id = world.submit(retries=1, outputs={"train_url": out}, fault_tolerance={
        "checkpoint": "train_url", "backoff": {"initial": 0}})
    world.tick()
    world.fake.exit(job_id, code=1)
    world.tick()
    first, second = world.fake.launches(job_id)
    assert (first.env["CORRAL_CHECKPOINT_DIR"], first.env["CORRAL_ATTEMPT"]) == (out, "1")
    assert (second.env["CORRAL_CHECKPOINT_DIR"], second.env["CORRAL_ATTEMPT"]) == (out, "2")
    other = world.submit(outputs={"train_url": out})
    world.tick()
    assert "CORRAL_CHECKPOINT_DIR" not in world.fake.launches(other)[0].env

