"""Fault tolerance with real processes through a live server: exit-code and log rules,
retry elsewhere, hangs, run time, memory, backoff as the API shows it, and the example
resuming from its checkpoint after its process was killed."""

from __future__ import annotations

import contextlib
import os
import pathlib
import signal
from collections.abc import Iterator
from typing import Any

import pytest

from corral.executors import base
from corral.oskit import procs
from tests import conftest, factories

Live = conftest.Live
EXAMPLE = pathlib.Path(__file__).parents[2] / "examples" / "mlp"
NO_BACKOFF = {"backoff": {"initial": 0}}
#: attempt 1 does `$FIRST`, any later one exits 0
SECOND_SUCCEEDS = 'if [ "$CORRAL_ATTEMPT" = 1 ]; then {first}; fi; echo second attempt'


@pytest.fixture
def live(tmp_path: pathlib.Path) -> Iterator[Live]:
    server = conftest.start_live(tmp_path / "home", cpus=2, memory_gb=8, flavors=[
        {"flavor_id": "corral.cpu.1u", "cpu": 1, "memory_gb": 2},
        {"flavor_id": "small", "cpu": 1, "memory_gb": 1}])
    yield server
    conftest.stop_live(server)


def run(live: Live, timeout: float = 30, **job: Any) -> dict[str, Any]:
    return live.wait(live.submit(factories.make_job(**job))["metadata"]["id"], timeout=timeout)


def records(job: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [(r.get("end_reason"), r.get("end_recover"), r.get("failure_class"))
            for r in job["status"]["running_records"]]


def events(live: Live, job_id: str) -> list[str]:
    r = live.http.get(live.path(f"/training-jobs/{job_id}/events"), params={"limit": 100})
    assert r.status_code == 200, r.text
    return [e["message"] for e in r.json()["events"]]


def log_of(live: Live, job_id: str, attempt: int) -> str:
    r = live.http.get(live.path(f"/training-jobs/{job_id}/tasks/worker-0/logs"),
                      params={"attempt": attempt})
    return str(r.json()["content"]) if r.status_code == 200 else ""


# --- rules --------------------------------------------------------------------------------


def test_a_listed_exit_code_fails_at_once_though_retries_are_left(live: Live) -> None:
    job = run(live, command="exit 3", retries=2,
              fault_tolerance={"rules": [{"exit_codes": [3], "action": "no_retry"}]})
    status = job["status"]
    assert (status["phase"], status["failure_class"], status["reason"]) == (
        "Failed", "user_exit", "worker-0: exit with 3")
    assert records(job) == [("exit with 3", None, "user_exit")]
    assert ("Job failed: worker-0 exit with 3 (user_exit; rule exit code 3: do not retry)"
            in events(live, job["metadata"]["id"]))


def test_a_cuda_out_of_memory_line_is_not_retried(live: Live) -> None:
    job = run(live, retries=2, command=SECOND_SUCCEEDS.format(
        first="echo 'RuntimeError: CUDA out of memory. Tried to allocate 2 GiB'; exit 1"))
    assert (job["status"]["phase"], job["status"]["failure_class"]) == (
        "Failed", "out_of_memory")
    assert records(job) == [("exit with 1", None, "out_of_memory")]


def test_a_jobs_own_rule_for_cuda_out_of_memory_spends_the_out_of_memory_budget(
        live: Live) -> None:
    job = run(live, retries=3, command="echo 'RuntimeError: CUDA out of memory.'; exit 1",
              fault_tolerance={**NO_BACKOFF, "budgets": {"out_of_memory": 1}, "rules": [
                  {"log_contains": "CUDA out of memory", "action": "retry"}]})
    assert (job["status"]["phase"], job["status"]["failure_class"]) == (
        "Failed", "out_of_memory")
    assert records(job) == [("exit with 1", "proc_restart", "out_of_memory"),
                            ("exit with 1", None, "out_of_memory")]
    assert ("Job failed: worker-0 exit with 1 (out_of_memory; its out_of_memory budget of 1 "
            "is spent)" in events(live, job["metadata"]["id"]))


def test_a_matched_line_sends_the_job_back_to_the_queue_kept_off_its_node(live: Live) -> None:
    # One node: kept off it, the job could never start, so it goes back to it.
    job = run(live, retries=1, command=SECOND_SUCCEEDS.format(
        first="echo 'NCCL WARN NET/Socket: peer unreachable'; exit 1"), fault_tolerance={
        **NO_BACKOFF, "rules": [{"log_contains": "peer unreachable",
                                 "action": "retry_elsewhere"}]})
    assert job["status"]["phase"] == "Completed"
    assert records(job) == [("exit with 1", "job_reschedule_with_taint", "user_exit"),
                            ("job completed", None, None)]
    assert ("Job requeued: exit with 1; kept off node local"
            in events(live, job["metadata"]["id"]))


# --- hangs, run time, memory --------------------------------------------------------------


def test_a_silent_job_hangs_and_fails_hanged(live: Live) -> None:
    job = run(live, command="sleep 600", retries=1, fault_tolerance={"hang_timeout": 1})
    status = job["status"]
    assert (status["phase"], status["failure_class"], status["reason"]) == (
        "Failed", "hang", "hanged")
    assert records(job) == [("hanged", None, "hang")]
    said = [e for e in events(live, job["metadata"]["id"]) if e.startswith("Job hung")]
    assert len(said) == 1 and said[0].startswith("Job hung: worker-0 wrote no log for ")
    assert said[0].endswith("(hang timeout 1 s): stopping it")


def test_a_hung_job_with_hang_retry_is_restarted(live: Live) -> None:
    job = run(live, command=SECOND_SUCCEEDS.format(first="sleep 600"), retries=1,
              annotations={"fault-tolerance/hang-retry": "true"},
              fault_tolerance={"hang_timeout": 1, **NO_BACKOFF})
    assert job["status"]["phase"] == "Completed"
    assert records(job) == [("hanged", "proc_restart", "hang"), ("job completed", None, None)]


def test_a_job_that_keeps_writing_is_not_hung(live: Live) -> None:
    chatty = "import time; [(print(i, flush=True), time.sleep(0.5)) for i in range(6)]"
    job = run(live, command=f'python3 -c "{chatty}"', fault_tolerance={"hang_timeout": 1})
    assert job["status"]["phase"] == "Completed"


def test_a_job_past_its_max_run_time_fails_timeout(live: Live) -> None:
    job = run(live, command="sleep 600", retries=3, fault_tolerance={"max_run_time": 1})
    status = job["status"]
    assert (status["phase"], status["failure_class"]) == ("Failed", "timeout")
    assert status["reason"] == "timeout: ran past its max_run_time of 1 s"
    assert len(status["running_records"]) == 1


def test_a_job_over_its_memory_is_retried_as_out_of_memory(live: Live) -> None:
    executor = live.embedded.platform.executor
    assert isinstance(executor, base.Contains)
    if "memory limited" not in executor.containment():
        pytest.skip("this machine gives the server no cgroup memory controller")
    job = run(live, command="python3 -c \"big = b'x' * (2 << 30)\"", flavor_id="small",
              retries=1, fault_tolerance=NO_BACKOFF)
    assert (job["status"]["phase"], job["status"]["failure_class"]) == (
        "Failed", "out_of_memory")
    assert [r[1:] for r in records(job)] == [("proc_restart", "out_of_memory"),
                                             (None, "out_of_memory")]


# --- backoff, as the API shows it ---------------------------------------------------------


def test_a_job_waiting_out_its_backoff_says_so_and_can_be_stopped(live: Live) -> None:
    job_id = live.submit(factories.make_job(command="exit 1", retries=1, fault_tolerance={
        "backoff": {"initial": 60}}))["metadata"]["id"]
    job = factories.wait_for(lambda: (j := live.job(job_id))["status"].get("restart_at") and j,
                             what="the backoff")
    status = job["status"]
    assert status["phase"] == "Running"
    assert status["reason"].startswith("restarting in ")
    assert status["reason"].endswith(" s after worker-0 exit with 1 (retry 1 of 1)")
    assert 55_000 < status["restart_at"] - job["metadata"]["create_time"] < 65_000
    assert records(job) == [("exit with 1", "proc_restart", "user_exit")]

    r = live.http.post(live.path(f"/training-jobs/{job_id}/actions"),
                       json={"action_type": "terminate"})
    assert r.status_code == 202, r.text
    job = live.wait(job_id)
    assert (job["status"]["phase"], job["status"]["failure_class"]) == ("Terminated", "stopped")
    assert "restart_at" not in job["status"]
    assert len(job["status"]["running_records"]) == 1


# --- checkpoints --------------------------------------------------------------------------


def test_the_example_resumes_from_its_checkpoint_after_its_process_is_killed(
        live: Live, tmp_path: pathlib.Path) -> None:
    out = tmp_path / "out"
    body = factories.make_job(
        code_dir=EXAMPLE, parameters={"epochs": 400, "log_every": 100, "checkpoint_every": 10},
        outputs={"train_url": str(out)}, retries=1,
        fault_tolerance={"checkpoint": "train_url", **NO_BACKOFF})
    job_id = live.submit(body)["metadata"]["id"]
    factories.wait_for(lambda: (out / "checkpoint.npz").exists(), timeout=30,
                       what="the first checkpoint")
    for pid in _task_pids(job_id):  # a crash: the task is killed outright
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)

    job = live.wait(job_id, timeout=60)

    assert job["status"]["phase"] == "Completed", job["status"]
    assert records(job)[0] == ("exit with 137", "proc_restart", "user_exit")
    first, second = log_of(live, job_id, 1), log_of(live, job_id, 2)
    assert "resuming" not in first
    assert "resuming after epoch " in second and str(out / "checkpoint.npz") in second
    assert "epoch 400/400" in second and (out / "model.npz").is_file()


def _task_pids(job_id: str) -> list[int]:
    """The processes of a job's tasks (their environment names the job)."""
    found = procs.carrying(f"CORRAL_JOB_ID={job_id}".encode())
    assert found, f"no process of job {job_id}"
    return found
