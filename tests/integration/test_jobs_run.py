"""Training jobs run end to end through a live server: real HTTP, real processes."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from corral.scheduler import cleanup
from corral.storage import runs
from tests import conftest, factories

Live = conftest.Live
#: restarts at once: these tests are not about the backoff (test_faults_run.py is)
NO_BACKOFF = {"backoff": {"initial": 0}}


@pytest.fixture
def live_server(tmp_path: pathlib.Path) -> Iterator[Live]:
    """A live server that counts 2 cores whatever this machine has: capacity tests hold."""
    live = conftest.start_live(tmp_path / "home", cpus=2)
    yield live
    conftest.stop_live(live)


# A task that says it started (its pid in $STATE/ready-$TAG) and waits for $STATE/go-$TAG.
WAIT_FOR_GO = """
import os, pathlib, sys, time
state = pathlib.Path(os.environ["STATE"])
tag = os.environ.get("TAG", "t")
(state / f"ready-{tag}").write_text(str(os.getpid()))
while not (state / f"go-{tag}").exists():
    time.sleep(0.02)
sys.exit(int(os.environ.get("CODE", "0")))
"""


def pids_in(path: pathlib.Path) -> list[int]:
    return [int(x) for x in path.read_text().split()] if path.exists() else []


def preview(live: Live, job_id: str, task: str = "worker-0") -> str:
    r = live.http.get(live.path(f"/training-jobs/{job_id}/tasks/{task}/logs/preview"))
    assert r.status_code == 200, r.text
    return str(r.json()["content"])


def attempt_log(live: Live, job_id: str, attempt: int, task: str = "worker-0") -> str:
    r = live.http.get(
        live.path(f"/training-jobs/{job_id}/tasks/{task}/logs"), params={"attempt": attempt}
    )
    assert r.status_code == 200, r.text
    return str(r.json()["content"])


def events(live: Live, job_id: str) -> list[dict[str, Any]]:
    r = live.http.get(live.path(f"/training-jobs/{job_id}/events"), params={"limit": 100})
    assert r.status_code == 200, r.text
    return list(r.json()["events"])


def exit_codes(job: dict[str, Any]) -> dict[str, int | None]:
    return {t["task"]: t.get("exit_code") for t in job["status"]["task_statuses"]}


def terminate(live: Live, job_id: str) -> dict[str, Any]:
    r = live.http.post(
        live.path(f"/training-jobs/{job_id}/actions"), json={"action_type": "terminate"}
    )
    assert r.status_code == 202, r.text
    return dict(r.json())


def waiting_job(
    tmp_path: pathlib.Path, tag: str = "t", code: int = 0, **overrides: Any
) -> dict[str, Any]:
    state = tmp_path / "state"
    state.mkdir(exist_ok=True)
    env = {"STATE": str(state), "TAG": tag, "CODE": str(code)}
    return factories.make_job(
        code_dir=factories.write_code(tmp_path, WAIT_FOR_GO), environments=env, **overrides
    )


# --- a job's life -----------------------------------------------------------------------


def test_a_successful_job_gets_its_arguments_environment_and_outputs(
    live_server: Live, tmp_path: pathlib.Path
) -> None:
    data, out = tmp_path / "data", tmp_path / "out"
    data.mkdir()
    (data / "points.txt").write_text("1 2 3")
    code = factories.write_code(
        tmp_path,
        """
import json, os, pathlib, sys
args = dict(a[2:].split("=", 1) for a in sys.argv[1:])
print("ARGV", json.dumps(sys.argv[1:]))
print("ENV", json.dumps({k: os.environ.get(k) for k in
                         ("GREETING", "CORRAL_JOB_ID", "CORRAL_TASK_ID")}))
total = sum(int(x) for x in pathlib.Path(args["data_url"], "points.txt").read_text().split())
pathlib.Path(args["train_url"], "model.txt").write_text(f"lr={args['lr']} total={total}")
print("trained")
""",
    )
    body = factories.make_job(
        code_dir=code,
        parameters={"lr": 0.1, "epochs": 3},
        inputs={"data_url": str(data)},
        outputs={"train_url": str(out)},
        environments={"GREETING": "hello"},
    )

    job_id = live_server.submit(body)["metadata"]["id"]
    job = live_server.wait(job_id)

    assert job["status"]["phase"] == "Completed"
    assert exit_codes(job) == {"worker-0": 0}
    log = preview(live_server, job_id)
    argv = json.loads(log.split("ARGV ", 1)[1].splitlines()[0])
    assert argv == ["--lr=0.1", "--epochs=3", f"--data_url={data}", f"--train_url={out}"]
    env = json.loads(log.split("ENV ", 1)[1].splitlines()[0])
    assert env == {"GREETING": "hello", "CORRAL_JOB_ID": job_id, "CORRAL_TASK_ID": "worker-0"}
    assert "trained" in log
    assert (out / "model.txt").read_text() == "lr=0.1 total=6"


def test_a_command_job_gets_its_parameters(live_server: Live, tmp_path: pathlib.Path) -> None:
    out = tmp_path / "out"
    body = factories.make_job(
        command='touch "$OUT/done"; echo args:',
        parameters={"epochs": 2},
        environments={"OUT": str(out)},
        outputs={"train_url": str(out)},
    )

    job = live_server.wait(live_server.submit(body)["metadata"]["id"])

    assert job["status"]["phase"] == "Completed"
    assert f"args: --epochs=2 --train_url={out}" in preview(live_server, job["metadata"]["id"])
    assert (out / "done").exists()


def test_a_command_without_arguments_may_end_in_a_shell_keyword(live_server: Live) -> None:
    """Nothing is appended to a command that has no arguments: `...; fi` runs as written."""
    body = factories.make_job(command='if [ "$CORRAL_ATTEMPT" = 1 ]; then exit 3; fi')
    job = live_server.wait(live_server.submit(body)["metadata"]["id"])
    assert exit_codes(job) == {"worker-0": 3}  # (a syntax error would be 2)


def test_a_non_zero_exit_fails_the_job(live_server: Live, tmp_path: pathlib.Path) -> None:
    code = factories.write_code(tmp_path, "import sys; print('bad data'); sys.exit(3)")

    job_id = live_server.submit(factories.make_job(code_dir=code))["metadata"]["id"]
    job = live_server.wait(job_id)

    status = job["status"]
    assert (status["phase"], status["secondary_phase"]) == ("Failed", "Failed")
    assert exit_codes(job) == {"worker-0": 3}
    [record] = status["running_records"]
    assert record["end_reason"] == "exit with 3"
    assert record["end_related_task"] == "worker-0"
    assert record.get("end_recover") is None
    assert "bad data" in preview(live_server, job_id)


def counting_job(tmp_path: pathlib.Path, counter: pathlib.Path, *, succeed_on: int,
                 retries: int, say: str = "run {n}") -> dict[str, Any]:
    """A job whose Nth run (counted in `counter`, across attempts) prints `say` (an
    f-string of `n`) and fails until the `succeed_on`th."""
    code = factories.write_code(
        tmp_path,
        f"""
import os, pathlib, sys
counter = pathlib.Path(os.environ["COUNTER"])
n = int(counter.read_text()) + 1 if counter.exists() else 1
counter.write_text(str(n))
print(f"{say}")
sys.exit(0 if n >= {succeed_on} else 1)
""",
    )
    return factories.make_job(code_dir=code, retries=retries, fault_tolerance=NO_BACKOFF,
                              environments={"COUNTER": str(counter)})


def test_a_failing_job_is_retried_until_it_succeeds(
    live_server: Live, tmp_path: pathlib.Path
) -> None:
    counter = tmp_path / "runs"
    body = counting_job(tmp_path, counter, succeed_on=3, retries=3)

    job_id = live_server.submit(body)["metadata"]["id"]
    job = live_server.wait(job_id)

    assert job["status"]["phase"] == "Completed"
    assert counter.read_text() == "3"
    records = job["status"]["running_records"]
    assert [r["start_type"] for r in records] == ["init_or_rescheduled", "restarted", "restarted"]
    assert [r.get("end_recover") for r in records] == ["proc_restart", "proc_restart", None]
    assert [r["end_reason"] for r in records] == ["exit with 1", "exit with 1", "job completed"]
    # each attempt keeps its own log
    assert [attempt_log(live_server, job_id, n).strip() for n in (1, 2, 3)] == [
        "run 1",
        "run 2",
        "run 3",
    ]


def test_each_attempts_logs_are_exported_and_outlive_the_job(
    live_server: Live, tmp_path: pathlib.Path
) -> None:
    body = counting_job(tmp_path, tmp_path / "runs", succeed_on=2, retries=1,
                        say="run {n} of {os.environ['CORRAL_TASK_ID']}")
    export = tmp_path / "exported"
    body["spec"]["log_export_path"] = {"host_path": str(export)}
    job_id = live_server.submit(body)["metadata"]["id"]
    assert live_server.wait(job_id)["status"]["phase"] == "Completed"

    def exported() -> list[str] | None:
        found = sorted(str(p.relative_to(export)) for p in export.rglob("*.log"))
        return found if len(found) == 2 else None

    assert factories.wait_for(exported, what="both attempts' logs exported") == [
        "attempt-1/worker-0.log", "attempt-2/worker-0.log"]
    assert (export / "attempt-1" / "worker-0.log").read_text() == "run 1 of worker-0\n"
    assert (export / "attempt-2" / "worker-0.log").read_text() == "run 2 of worker-0\n"
    r = live_server.http.delete(live_server.path(f"/training-jobs/{job_id}"))
    assert r.status_code == 202, r.text
    factories.wait_for(lambda: not (live_server.settings.runs_dir / job_id).exists(),
                       what="the job's run directory to go")
    assert (export / "attempt-2" / "worker-0.log").read_text() == "run 2 of worker-0\n"


def test_logs_a_killed_server_never_copied_are_exported_when_the_job_is_finished(
    live_server: Live, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The files thread copies an attempt's logs after the pass that ended it has committed;
    # a server killed in between never copies them. Finishing the job (done again by the
    # next server until it is done) makes the copies that are missing.
    monkeypatch.setattr(cleanup.Files, "export_logs", lambda self, job, attempt: None)
    export = tmp_path / "exported"
    body = factories.make_job(command="echo from the job")
    body["spec"]["log_export_path"] = {"host_path": str(export)}
    job_id = live_server.submit(body)["metadata"]["id"]
    assert live_server.wait(job_id)["status"]["phase"] == "Completed"

    log = export / "attempt-1" / "worker-0.log"
    factories.wait_for(log.exists, what="the attempt's log exported")
    assert log.read_text() == "from the job\n"


def test_retries_run_out(live_server: Live, tmp_path: pathlib.Path) -> None:
    counter = tmp_path / "runs"
    body = factories.make_job(command=f'echo x >> "{counter}"; exit 2', retries=1,
                              fault_tolerance=NO_BACKOFF)

    job = live_server.wait(live_server.submit(body)["metadata"]["id"])

    assert job["status"]["phase"] == "Failed"
    assert counter.read_text().count("x") == 2
    assert [r["end_reason"] for r in job["status"]["running_records"]] == [
        "exit with 2",
        "exit with 2",
    ]


# --- stopping ---------------------------------------------------------------------------


def test_terminate_kills_a_job_that_ignores_sigterm(
    live_server: Live, tmp_path: pathlib.Path
) -> None:
    pid_file = tmp_path / "pid"
    code = factories.write_code(
        tmp_path,
        f"""
import os, pathlib, signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
pathlib.Path({str(pid_file)!r}).write_text(str(os.getpid()))
time.sleep(120)
""",
    )
    job_id = live_server.submit(factories.make_job(code_dir=code))["metadata"]["id"]
    pid = factories.wait_for(lambda: pids_in(pid_file), what="the task to start")[0]

    assert terminate(live_server, job_id)["status"]["phase"] == "Terminating"
    job = live_server.wait(job_id)

    assert (job["status"]["phase"], job["status"]["secondary_phase"]) == (
        "Terminated",
        "Terminated",
    )
    assert not factories.alive(pid)
    assert job["status"]["running_records"][-1]["end_reason"] == "terminated by user"


def test_terminate_leaves_no_child_of_the_job(live_server: Live, tmp_path: pathlib.Path) -> None:
    pid_file = tmp_path / "pids"
    code = factories.write_code(
        tmp_path,
        f"""
import os, pathlib, subprocess, sys, time
kids = [subprocess.Popen(["sleep", "120"]),
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])]
pathlib.Path({str(pid_file)!r}).write_text(" ".join(str(p) for p in
                                           [os.getpid(), *(k.pid for k in kids)]))
time.sleep(120)
""",
    )
    job_id = live_server.submit(factories.make_job(code_dir=code))["metadata"]["id"]
    pids = factories.wait_for(lambda: pids_in(pid_file), what="the tree to start")

    terminate(live_server, job_id)

    assert live_server.wait(job_id)["status"]["phase"] == "Terminated"
    factories.wait_for(
        lambda: not any(factories.alive(p) for p in pids), 5, "every process of the job to end"
    )


def test_terminate_leaves_no_grandchild_that_left_the_group(
    live_server: Live, tmp_path: pathlib.Path
) -> None:
    """A grandchild in its own session (setsid) is part of the job as well."""
    pid_file = tmp_path / "pids"
    code = factories.write_code(
        tmp_path,
        f"""
import os, pathlib, subprocess, sys, time
pids = pathlib.Path({str(pid_file)!r})
grandchild = "import os, time; os.setsid(); time.sleep(120)"
child = subprocess.Popen([sys.executable, "-c",
    "import subprocess, sys, time; "
    f"p = subprocess.Popen([sys.executable, '-c', {{grandchild!r}}]); "
    f"open({{str(pids)!r}}, 'a').write(f' {{{{p.pid}}}}'); time.sleep(120)"])
time.sleep(120)
""",
    )
    job_id = live_server.submit(factories.make_job(code_dir=code))["metadata"]["id"]
    grandchild = factories.wait_for(lambda: pids_in(pid_file), what="the grandchild to start")[0]

    try:
        terminate(live_server, job_id)
        assert live_server.wait(job_id)["status"]["phase"] == "Terminated"
        factories.wait_for(lambda: not factories.alive(grandchild), 5, "the grandchild to end")
    finally:
        if factories.alive(grandchild):
            os.kill(grandchild, signal.SIGKILL)


def test_a_job_leaves_no_background_process_when_it_ends(
    live_server: Live, tmp_path: pathlib.Path
) -> None:
    pid_file = tmp_path / "pid"
    body = factories.make_job(command=f'sleep 120 & echo $! > "{pid_file}"; exit 0')

    job = live_server.wait(live_server.submit(body)["metadata"]["id"])

    assert job["status"]["phase"] == "Completed"
    factories.wait_for(
        lambda: not factories.alive(pids_in(pid_file)[0]), 5, "the background sleep to end"
    )


def test_delete_stops_a_running_job_and_keeps_its_outputs(
    live_server: Live, tmp_path: pathlib.Path
) -> None:
    out, pid_file = tmp_path / "out", tmp_path / "pid"
    code = factories.write_code(
        tmp_path,
        f"""
import os, pathlib, sys, time
out = pathlib.Path(sys.argv[1].split("=", 1)[1])
(out / "checkpoint.txt").write_text("epoch 1")
pathlib.Path({str(pid_file)!r}).write_text(str(os.getpid()))
time.sleep(120)
""",
    )
    body = factories.make_job(code_dir=code, outputs={"train_url": str(out)})
    job_id = live_server.submit(body)["metadata"]["id"]
    pid = factories.wait_for(lambda: pids_in(pid_file), what="the task to start")[0]
    run_dir = live_server.settings.runs_dir / job_id
    assert run_dir.is_dir()

    r = live_server.http.delete(live_server.path(f"/training-jobs/{job_id}"))

    assert r.status_code == 202, r.text
    gone = live_server.http.get(live_server.path(f"/training-jobs/{job_id}"))
    assert gone.status_code == 404
    assert gone.json()["error_code"] == "ModelArts.2775"
    factories.wait_for(lambda: not factories.alive(pid), 10, "the task to be stopped")
    factories.wait_for(lambda: not run_dir.exists(), 10, "the run directory to be removed")
    assert (out / "checkpoint.txt").read_text() == "epoch 1"


# --- gangs and snapshots ----------------------------------------------------------------


def test_two_nodes_start_two_ranked_tasks(live_server: Live, tmp_path: pathlib.Path) -> None:
    out = tmp_path / "out"
    code = factories.write_code(
        tmp_path,
        """
import json, os, pathlib, sys
out = pathlib.Path(sys.argv[1].split("=", 1)[1])
keys = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "CORRAL_TASK_ID")
(out / f"rank-{os.environ['RANK']}.json").write_text(
    json.dumps({k: os.environ[k] for k in keys}))
""",
    )
    body = factories.make_job(code_dir=code, node_count=2, outputs={"train_url": str(out)})

    job_id = live_server.submit(body)["metadata"]["id"]
    job = live_server.wait(job_id)

    assert job["status"]["phase"] == "Completed"
    assert job["status"]["tasks"] == ["worker-0", "worker-1"]
    assert exit_codes(job) == {"worker-0": 0, "worker-1": 0}
    seen = [json.loads((out / f"rank-{r}.json").read_text()) for r in (0, 1)]
    assert [(s["RANK"], s["CORRAL_TASK_ID"]) for s in seen] == [
        ("0", "worker-0"),
        ("1", "worker-1"),
    ]
    assert {s["WORLD_SIZE"] for s in seen} == {"2"}
    assert seen[0]["MASTER_PORT"] == seen[1]["MASTER_PORT"]
    assert seen[0]["MASTER_ADDR"] == seen[1]["MASTER_ADDR"]


def test_one_failed_rank_stops_the_whole_gang(live_server: Live, tmp_path: pathlib.Path) -> None:
    pid_file = tmp_path / "pids"
    code = factories.write_code(
        tmp_path,
        f"""
import os, pathlib, sys, time
with open({str(pid_file)!r}, "a") as fh:
    fh.write(f" {{os.getpid()}}")
if os.environ["RANK"] == "1":
    sys.exit(4)
time.sleep(120)
""",
    )
    body = factories.make_job(code_dir=code, node_count=2)

    job = live_server.wait(live_server.submit(body)["metadata"]["id"])

    assert job["status"]["phase"] == "Failed"
    assert job["status"]["running_records"][-1]["end_reason"] == "exit with 4"
    assert job["status"]["running_records"][-1]["end_related_task"] == "worker-1"
    assert not any(factories.alive(p) for p in pids_in(pid_file))


def test_code_is_snapshotted_per_attempt(live_server: Live, tmp_path: pathlib.Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    code = factories.write_code(
        tmp_path,
        """
import os, pathlib, sys, time
state = pathlib.Path(os.environ["STATE"])
attempt = os.environ["CORRAL_ATTEMPT"]
(state / f"ready-{attempt}").touch()
while not (state / "go").exists():
    time.sleep(0.02)
import helper
print("data", pathlib.Path("data.txt").read_text(), "helper", helper.VERSION)
sys.exit(1 if attempt == "1" else 0)
""",
    )
    (code / "data.txt").write_text("v1")
    (code / "helper.py").write_text("VERSION = 'v1'\n")
    body = factories.make_job(code_dir=code, retries=1, environments={"STATE": str(state)},
                              fault_tolerance=NO_BACKOFF)
    job_id = live_server.submit(body)["metadata"]["id"]
    factories.wait_for((state / "ready-1").exists, what="the first attempt to start")

    (code / "data.txt").write_text("v2")
    (code / "helper.py").write_text("VERSION = 'v2'\n")
    (state / "go").touch()
    job = live_server.wait(job_id)

    assert job["status"]["phase"] == "Completed"
    assert attempt_log(live_server, job_id, 1).strip() == "data v1 helper v1"
    assert attempt_log(live_server, job_id, 2).strip() == "data v2 helper v2"


def test_a_long_code_copy_does_not_hold_up_the_other_jobs(
    live_server: Live, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The copy of a job's code_dir (gigabytes take seconds) is held here until released:
    meanwhile another job is stopped and a third runs to its end, with real processes."""
    release = threading.Event()
    real = runs.snapshot

    def held(*args: Any) -> None:
        release.wait(60)
        real(*args)

    monkeypatch.setattr(runs, "snapshot", held)
    sleeper = live_server.submit(factories.make_job(command="sleep 60"))["metadata"]["id"]
    live_server.wait(sleeper, {"Running"})
    code = factories.write_code(tmp_path, "print('copied at last')\n")
    big = live_server.submit(factories.make_job(code_dir=code))["metadata"]["id"]
    live_server.wait(big, {"Running"})
    try:
        started = time.monotonic()
        r = live_server.http.post(live_server.path(f"/training-jobs/{sleeper}/actions"),
                                  json={"action_type": "terminate"})
        assert r.status_code == 202, r.text
        assert live_server.wait(sleeper, timeout=10)["status"]["phase"] == "Terminated"
        quick = live_server.submit(factories.make_job(command="echo quick"))["metadata"]["id"]
        assert live_server.wait(quick, timeout=10)["status"]["phase"] == "Completed"
        assert time.monotonic() - started < 20  # not the copy's 60 s
        assert not release.is_set() and live_server.job(big)["status"]["phase"] == "Running"
    finally:
        release.set()
    assert live_server.wait(big)["status"]["phase"] == "Completed"
    assert preview(live_server, big).strip() == "copied at last"


# --- queueing and capacity --------------------------------------------------------------


def test_a_job_that_does_not_fit_now_waits_then_runs(
    live_server: Live, tmp_path: pathlib.Path
) -> None:
    small = live_server.submit(waiting_job(tmp_path, tag="small"))["metadata"]["id"]
    live_server.wait(small, {"Running"})
    state = tmp_path / "state"
    factories.wait_for((state / "ready-small").exists, what="the small job to start")

    big_body = factories.make_job(command="echo whole machine", flavor_id="corral.cpu.full")
    big = live_server.submit(big_body)["metadata"]["id"]

    def warned() -> list[dict[str, Any]]:
        return [e for e in events(live_server, big) if e["level"] == "Warning"]

    [warning] = factories.wait_for(warned, what="a waiting event")
    job = live_server.job(big)
    assert (job["status"]["phase"], job["status"]["secondary_phase"]) == ("Pending", "Queuing")
    assert job["status"]["reason"].startswith("waiting for resources")
    assert warning["message"] == job["status"]["reason"]

    (state / "go-small").touch()
    assert live_server.wait(big)["status"]["phase"] == "Completed"
    assert live_server.job(small)["status"]["phase"] == "Completed"
    assert live_server.job(big)["status"]["reason"] is None


def test_a_job_that_can_never_fit_is_refused_and_nothing_is_created(live_server: Live) -> None:
    body = factories.make_job(name="too-big", command="true", node_count=5)

    r = live_server.http.post(live_server.path("/training-jobs"), json=body)

    assert r.status_code == 400
    assert r.json()["error_code"] == "ModelArts.2763"
    found = live_server.http.post(live_server.path("/training-job-searches"), json={})
    assert found.json()["total"] == 0
    body["spec"]["resource"]["node_count"] = 1
    assert live_server.submit(body)["metadata"]["name"] == "too-big"


def test_never_more_one_core_jobs_than_cores(live_server: Live, tmp_path: pathlib.Path) -> None:
    spans = tmp_path / "spans"
    spans.mkdir()
    code = factories.write_code(
        tmp_path,
        """
import os, pathlib, time
start = time.monotonic_ns()
time.sleep(0.5)
pathlib.Path(os.environ["SPANS"], os.environ["CORRAL_JOB_ID"]).write_text(
    f"{start} {time.monotonic_ns()}")
""",
    )
    ids = [
        live_server.submit(factories.make_job(code_dir=code, environments={"SPANS": str(spans)}))[
            "metadata"
        ]["id"]
        for _ in range(5)
    ]

    assert [live_server.wait(i)["status"]["phase"] for i in ids] == ["Completed"] * 5

    intervals = [tuple(map(int, (spans / i).read_text().split())) for i in ids]
    assert max_overlap(intervals) == 2


def max_overlap(intervals: list[tuple[int, ...]]) -> int:
    # At equal times an end comes before a start: touching intervals do not overlap.
    points = sorted([(s, 1) for s, _e in intervals] + [(e, -1) for _s, e in intervals])
    most = running = 0
    for _t, delta in points:
        running += delta
        most = max(most, running)
    return most


def test_npu_jobs_see_only_their_own_devices(tmp_path: pathlib.Path) -> None:
    """The machine is configured with 2 NPUs (nothing here detects them): each 1-NPU job's
    process gets its own device in ASCEND_RT_VISIBLE_DEVICES, a CPU job an empty one."""
    live = conftest.start_live(tmp_path / "home", cpus=2, accelerators={"npu": 2})
    try:
        show = 'python3 -c "import os; print(\'DEV=\' + os.environ[\'ASCEND_RT_VISIBLE_DEVICES\'])"'
        flavors = {f["flavor_id"]: f for f in live.http.get(
            live.path("/training-job-flavors")).json()["flavors"]}
        assert flavors["corral.npu.1x"]["flavor_info"]["npu"]["unit_num"] == "1"
        npu_jobs = [live.submit(factories.make_job(command=f"{show} && sleep 1",
                                                   flavor_id="corral.npu.1x"))
                    ["metadata"]["id"] for _ in range(2)]
        cpu_job = live.submit(factories.make_job(command=show))["metadata"]["id"]
        seen = []
        for job_id in [*npu_jobs, cpu_job]:
            assert live.wait(job_id)["status"]["phase"] == "Completed"
            seen.append(preview(live, job_id).split("DEV=", 1)[1].splitlines()[0])
        assert sorted(seen[:2]) == ["0", "1"] and seen[2] == ""
    finally:
        conftest.stop_live(live)


def test_a_launch_is_recorded_while_its_task_runs(tmp_path: pathlib.Path) -> None:
    """With nothing handed out ahead, the launcher's answer wakes a pass that records the
    task's process, so that the pass that sees it end has less to do. Nothing else would
    record it before the task ends: the timer's pass is a minute away here."""
    from corral.store import job_repo

    live = conftest.start_live(tmp_path / "home", tick_interval=60.0)
    try:
        body = factories.make_job(command="sleep 30")
        job_id = live.submit(body)["metadata"]["id"]
        store = live.embedded.platform.store

        def recorded() -> bool:
            with store.read() as conn:
                tasks = job_repo.tasks_of(conn, job_id, None)
            return bool(tasks) and tasks[0].state == "running" and bool(tasks[0].handle)

        factories.wait_for(recorded, timeout=10, what="the launch to be recorded")
        assert live.job(job_id)["status"]["phase"] == "Running"
        r = live.http.post(live.path(f"/training-jobs/{job_id}/actions"),
                           json={"action_type": "terminate"})
        assert r.status_code == 202, r.text
        assert live.wait(job_id)["status"]["phase"] == "Terminated"
    finally:
        conftest.stop_live(live)
