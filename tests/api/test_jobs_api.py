"""Every endpoint under /v2/{project_id} over real HTTP against an embedded server.

Jobs here are shell commands or tiny Python programs so that each test takes a moment;
the `live` fixture terminates whatever a test leaves running.
"""

from __future__ import annotations

import os
import pathlib
import re
import shlex
import socket
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from corral.sdk import client
from tests import conftest, factories

ACTIVE = ["Creating", "Pending", "Running", "Terminating"]
METRICS = {"cpuUsage", "memUsage", "gpuUtil", "gpuMemUsage"}


def py(source: str) -> str:
    """A job command that runs `source` with this interpreter."""
    return f"{shlex.quote(sys.executable)} -c {shlex.quote(source)}"


def pid_job(pidfile: pathlib.Path, seconds: int = 30) -> str:
    """A command that records its pid and then sleeps (the pid stays: exec)."""
    return f"echo $$ > {shlex.quote(str(pidfile))}; exec sleep {seconds}"


def search(live: conftest.Live, **body: Any) -> dict[str, Any]:
    r = live.http.post(live.path("/training-job-searches"), json=body)
    assert r.status_code == 200, r.text
    return dict(r.json())


def names(found: dict[str, Any]) -> list[str]:
    return [j["metadata"]["name"] for j in found["items"]]


def events(live: conftest.Live, job_id: str, **params: Any) -> dict[str, Any]:
    r = live.http.get(live.path(f"/training-jobs/{job_id}/events"), params=params)
    assert r.status_code == 200, r.text
    return dict(r.json())


def terminate(live: conftest.Live, job_id: str) -> Any:
    return live.http.post(
        live.path(f"/training-jobs/{job_id}/actions"), json={"action_type": "terminate"}
    )


def preview(live: conftest.Live, job_id: str, task: str = "worker-0") -> Any:
    return live.http.get(live.path(f"/training-jobs/{job_id}/tasks/{task}/logs/preview"))


def stop_all(live: conftest.Live) -> None:
    """Terminate every job still active and wait until each has stopped."""
    found = search(live, limit=50, filters=[{"key": "phase", "operator": "in", "value": ACTIVE}])
    for job in found["items"]:
        terminate(live, job["metadata"]["id"])
    for job in found["items"]:
        live.wait(job["metadata"]["id"])


@pytest.fixture
def live(live_server: conftest.Live) -> Iterator[conftest.Live]:
    yield live_server
    stop_all(live_server)


def wait_running(live: conftest.Live, job_id: str) -> dict[str, Any]:
    job = live.wait(job_id, {"Running", *conftest.TERMINAL})
    assert job["status"]["phase"] == "Running", job["status"]
    return job


# --- POST /training-jobs: the Job object -------------------------------------------------


def test_create_answers_201_with_the_documented_job(live: conftest.Live) -> None:
    body = factories.make_job(name="shape", command="sleep 30", retries=2)
    before = int(time.time() * 1000)

    r = live.http.post(live.path("/training-jobs"), json=body)

    assert r.status_code == 201, r.text
    job = r.json()
    assert job["kind"] == "job"
    meta = job["metadata"]
    assert uuid.UUID(meta["id"]).version == 4
    assert meta["name"] == "shape"
    assert before <= meta["create_time"] <= int(time.time() * 1000)  # milliseconds
    assert meta["annotations"] == {"fault-tolerance/job-retry-num": "2"}

    status = job["status"]
    assert status["phase"] in {"Creating", "Pending", "Running"}
    assert isinstance(status["secondary_phase"], str)
    assert isinstance(status["duration"], int)
    assert isinstance(status["start_time"], int)
    assert status["tasks"] == ["worker-0"]
    for key in ("task_statuses", "running_records", "node_count_metrics"):
        assert isinstance(status[key], list)


def test_create_echoes_the_algorithm_with_defaults_filled(
    live: conftest.Live, tmp_path: pathlib.Path
) -> None:
    code = factories.write_code(tmp_path, "import time; time.sleep(30)")
    data = tmp_path / "data"
    data.mkdir()
    out = tmp_path / "out"
    body = factories.make_job(
        code_dir=code,
        boot_file="train.py",
        parameters={"lr": 0.1, "epochs": 3},
        inputs={"data": f"file://{data}"},
        outputs={"model": str(out)},
        environments={"ALPHA": "1", "BETA": "two"},
    )

    alg = live.submit(body)["algorithm"]

    engines = live.http.get(live.path("/training-job-engines")).json()["items"]
    default = engines[0]
    assert alg["engine"]["engine_id"] == default["engine_id"]
    assert alg["engine"]["engine_name"] == default["engine_name"]
    assert alg["engine"]["engine_version"] == default["engine_version"]
    assert alg["code_dir"] == str(code)
    assert alg["boot_file"] == "train.py"
    assert alg["parameters"] == [{"name": "lr", "value": "0.1"}, {"name": "epochs", "value": "3"}]
    [inp] = alg["inputs"]
    assert inp["name"] == "data"
    assert inp["local_dir"] == str(data)
    [output] = alg["outputs"]
    assert output["remote"]["obs"]["obs_url"] == str(out)
    assert output["local_dir"] == str(out)
    assert output["mode"] == "upload_periodically"
    assert output["period"] == "30"
    # The response renders environments as a list of one-key maps, as the reference does.
    assert alg["environments"] == [{"ALPHA": "1"}, {"BETA": "two"}]


def test_create_shows_the_resource_with_its_flavor(live: conftest.Live) -> None:
    flavors = {
        f["flavor_id"]: f
        for f in live.http.get(live.path("/training-job-flavors")).json()["flavors"]
    }

    job = live.submit(factories.make_job(command="true", flavor_id="corral.cpu.1u"))

    res = job["spec"]["resource"]
    assert res["flavor_id"] == "corral.cpu.1u"
    assert res["node_count"] == 1
    assert res["flavor_name"] == flavors["corral.cpu.1u"]["flavor_name"]
    detail = res["flavor_detail"]
    assert detail["flavor_type"] == "CPU"
    assert detail["flavor_info"]["cpu"]["core_num"] == 1
    assert detail["flavor_info"]["memory"] == flavors["corral.cpu.1u"]["flavor_info"]["memory"]
    assert detail["billing"]["code"] == "corral.cpu.1u"


def test_a_created_job_can_be_submitted_again_as_it_was_echoed(
    live: conftest.Live, tmp_path: pathlib.Path
) -> None:
    """The response's algorithm and spec (environments as a list, engine filled) load back."""
    first = live.submit(
        factories.make_job(
            command="true", environments={"ALPHA": "1"}, outputs={"out": str(tmp_path / "o")}
        )
    )
    body = {
        "kind": "job",
        "metadata": {"name": "echoed-again"},
        "algorithm": first["algorithm"],
        "spec": first["spec"],
    }

    second = live.submit(body)

    assert second["algorithm"] == first["algorithm"]
    assert second["spec"]["resource"] == first["spec"]["resource"]


def test_create_takes_a_named_engine(live: conftest.Live) -> None:
    engine = live.http.get(live.path("/training-job-engines")).json()["items"][0]

    job = live.submit(
        factories.make_job(
            command="true",
            algorithm={
                "command": "true",
                "engine": {
                    "engine_name": engine["engine_name"],
                    "engine_version": engine["engine_version"],
                },
            },
        )
    )

    assert job["algorithm"]["engine"]["engine_id"] == engine["engine_id"]


# --- GET /training-jobs/{id} -------------------------------------------------------------


def test_show_a_completed_job(live: conftest.Live) -> None:
    job_id = live.submit(factories.make_job(command=py("print('hi')")))["metadata"]["id"]

    job = live.wait(job_id)

    status = job["status"]
    assert (status["phase"], status["secondary_phase"]) == ("Completed", "Completed")
    assert status["start_time"] >= job["metadata"]["create_time"]
    assert status["duration"] >= 0
    assert [(t["task"], t["exit_code"]) for t in status["task_statuses"]] == [("worker-0", 0)]
    [record] = status["running_records"]
    assert record["start_type"] == "init_or_rescheduled"
    assert record["start_at"] <= record["end_at"]  # seconds, as documented
    assert record["start_at"] == status["start_time"] // 1000
    [[started, n_start], [ended, n_end]] = status["node_count_metrics"]
    assert (n_start, n_end) == (1, 0)
    assert started <= ended


def test_show_a_failed_job_with_its_exit_code(live: conftest.Live) -> None:
    job_id = live.submit(factories.make_job(command="exit 3"))["metadata"]["id"]

    job = live.wait(job_id)

    assert job["status"]["phase"] == "Failed"
    assert [(t["task"], t["exit_code"]) for t in job["status"]["task_statuses"]] == [
        ("worker-0", 3)
    ]
    [record] = job["status"]["running_records"]
    assert record["end_reason"] == "exit with 3"
    assert record["end_related_task"] == "worker-0"


def test_show_a_running_job_counts_its_duration(live: conftest.Live) -> None:
    job_id = live.submit(factories.make_job(command="sleep 30"))["metadata"]["id"]
    wait_running(live, job_id)

    job = factories.wait_for(
        lambda: (j := live.job(job_id))["status"]["duration"] > 0 and j,
        what="a running job's duration grows",
    )

    assert job["status"]["start_time"] > 0
    [record] = job["status"]["running_records"]
    assert "end_at" not in record or record["end_at"] is None


def test_show_a_two_node_job_lists_both_tasks(live: conftest.Live) -> None:
    job_id = live.submit(factories.make_job(command="true", node_count=2))["metadata"]["id"]

    job = live.wait(job_id)

    assert job["status"]["phase"] == "Completed"
    assert job["status"]["tasks"] == ["worker-0", "worker-1"]
    assert sorted(t["task"] for t in job["status"]["task_statuses"]) == ["worker-0", "worker-1"]
    assert job["spec"]["resource"]["node_count"] == 2


# --- PUT /training-jobs/{id} -------------------------------------------------------------


# --- GET /training-jobs/{id}?watch=...: waiting on a job (a corral extension) -----------


def gated(gate: pathlib.Path) -> str:
    """A job command that runs until `gate` exists, then exits 0."""
    return py(f"import os, time\nwhile not os.path.exists({str(gate)!r}): time.sleep(0.01)")


def watch(live: conftest.Live, job_id: str, *phases: str, timeout: float | None = None,
          http: Any = None) -> Any:
    params: list[tuple[str, Any]] = [("watch", p) for p in phases]
    if timeout is not None:
        params.append(("timeout", timeout))
    return (http or live.http).get(live.path(f"/training-jobs/{job_id}"), params=params)


def test_watch_answers_once_the_job_has_left_the_watched_phases(
    live: conftest.Live, tmp_path: pathlib.Path
) -> None:
    gate = tmp_path / "gate"
    job_id = live.submit(factories.make_job(command=gated(gate)))["metadata"]["id"]
    wait_running(live, job_id)
    opener = threading.Timer(0.3, gate.touch)
    opener.start()
    try:
        r = watch(live, job_id, "Creating", "Pending", "Running")
    finally:
        opener.cancel()

    assert r.status_code == 200, r.text
    status = r.json()["status"]
    assert status["phase"] == "Completed"
    assert [(t["task"], t["exit_code"]) for t in status["task_statuses"]] == [("worker-0", 0)]


def test_watch_answers_a_terminate(live: conftest.Live) -> None:
    job_id = live.submit(factories.make_job(command="sleep 30"))["metadata"]["id"]
    wait_running(live, job_id)
    with conftest.http_client(live.url, live.login.token) as other:
        stopper = threading.Timer(0.3, lambda: other.post(
            live.path(f"/training-jobs/{job_id}/actions"), json={"action_type": "terminate"}))
        stopper.start()
        try:
            r = watch(live, job_id, "Running")
        finally:
            stopper.join()

    assert r.status_code == 200, r.text
    assert r.json()["status"]["phase"] in ("Terminating", "Terminated")


def test_watch_answers_at_once_a_job_not_in_the_watched_phases(live: conftest.Live) -> None:
    job_id = live.submit(factories.make_job(command="true"))["metadata"]["id"]
    live.wait(job_id)

    r = watch(live, job_id, "Running", timeout=60)

    assert r.status_code == 200, r.text
    assert r.json()["status"]["phase"] == "Completed"


def test_watch_answers_with_the_job_as_it_is_when_its_timeout_has_passed(
    live: conftest.Live,
) -> None:
    job_id = live.submit(factories.make_job(command="sleep 30"))["metadata"]["id"]
    wait_running(live, job_id)

    r = watch(live, job_id, "Running", timeout=0.2)

    assert r.status_code == 200, r.text
    assert r.json()["status"]["phase"] == "Running"


def test_a_watch_whose_client_went_away_ends_without_waiting_out_its_timeout(
    live: conftest.Live,
) -> None:
    job_id = live.submit(factories.make_job(command="sleep 30"))["metadata"]["id"]
    wait_running(live, job_id)
    changes = live.embedded.platform.context.changes
    host, port = live.url.removeprefix("http://").split(":")
    request = (f"GET {live.path(f'/training-jobs/{job_id}')}?watch=Running&timeout=60 "
               f"HTTP/1.1\r\nHost: {host}\r\nX-Auth-Token: {live.login.token}\r\n\r\n")
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(request.encode())
        deadline = time.monotonic() + 10
        while changes.watched() == 0:
            assert time.monotonic() < deadline, "the watch never started"
            time.sleep(0.01)
    # The client has closed its connection: the watch ends within a recheck or two, not
    # after its 60 s.
    deadline = time.monotonic() + 10
    while changes.watched():
        assert time.monotonic() < deadline, "the watch outlived its client"
        time.sleep(0.05)


def test_a_watch_builds_the_jobs_body_only_for_its_answer(
    live: conftest.Live, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every change of the job wakes its watchers, which read it again: while its phase is
    # still watched that read is its phase alone, not the whole body (records, queue).
    from corral.api import views

    built: list[str] = []
    real = views.job

    def counted(*args: Any, **kwargs: Any) -> Any:
        out = real(*args, **kwargs)
        built.append(out["status"]["phase"])
        return out

    monkeypatch.setattr(views, "job", counted)
    gate = tmp_path / "gate"
    job_id = live.submit(factories.make_job(command=gated(gate)))["metadata"]["id"]
    wait_running(live, job_id)
    changes = live.embedded.platform.context.changes
    built.clear()

    def poke_then_open() -> None:
        deadline = time.monotonic() + 10
        while changes.watched() == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        for _ in range(5):  # changes that leave the job Running
            changes.changed([job_id])
            time.sleep(0.05)
        gate.touch()

    poker = threading.Thread(target=poke_then_open)
    poker.start()
    try:
        r = watch(live, job_id, "Running", timeout=30)
    finally:
        poker.join()

    assert r.status_code == 200, r.text
    assert r.json()["status"]["phase"] == "Completed"
    assert built == ["Completed"]


def test_a_watch_does_not_read_the_job_while_the_scheduler_starts_it(
    live: conftest.Live, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The scheduler says which phase it moved a job to: a watch waiting for the job to
    # leave Pending and Running reads it when the watch begins and once it has ended, not
    # when it starts (Running) nor when its start is recorded (its phase kept).
    from corral.api import jobs as jobs_api
    from corral.api import watch as watch_mod

    monkeypatch.setattr(watch_mod, "RECHECK_S", 60.0)  # no read for lack of news
    reads: list[str] = []
    real = jobs_api._body_unless

    def counted(ctx: Any, project_id: str, job_id: str, phases: Any) -> Any:
        out = real(ctx, project_id, job_id, phases)
        if phases:  # the watch's reads (a plain GET passes none)
            reads.append("answer" if out is not None else "still waiting")
        return out

    monkeypatch.setattr(jobs_api, "_body_unless", counted)
    blocker = live.submit(factories.make_job(command="sleep 30", flavor_id="corral.cpu.full"))[
        "metadata"]["id"]
    wait_running(live, blocker)
    gate = tmp_path / "gate"
    job_id = live.submit(factories.make_job(command=gated(gate)))["metadata"]["id"]
    factories.wait_for(lambda: live.job(job_id)["status"]["secondary_phase"] == "Queuing")
    changes = live.embedded.platform.context.changes

    def start_then_end() -> None:
        factories.wait_for(lambda: changes.watched() == 1, what="the watch begins")
        assert terminate(live, blocker).status_code == 202  # the watched job starts
        wait_running(live, job_id)
        time.sleep(0.3)  # (its start recorded)
        gate.touch()

    helper = threading.Thread(target=start_then_end)
    helper.start()
    try:
        reads.clear()
        r = watch(live, job_id, "Pending", "Running", timeout=30)
    finally:
        helper.join()

    assert r.status_code == 200, r.text
    assert r.json()["status"]["phase"] == "Completed"
    assert reads == ["still waiting", "answer"]


@pytest.mark.parametrize("params", [
    [("watch", "Sleeping")],
    [("watch", "Running"), ("timeout", "0")],
    [("watch", "Running"), ("timeout", "61")],
    [("watch", "Running"), ("timeout", "soon")],
])
def test_watch_refuses_bad_parameters(live: conftest.Live, params: list[tuple[str, str]]) -> None:
    job_id = live.submit(factories.make_job(command="true"))["metadata"]["id"]

    r = live.http.get(live.path(f"/training-jobs/{job_id}"), params=params)

    assert r.status_code == 400, r.text
    assert r.json()["error_code"] == "ModelArts.2788"


def test_watch_of_an_unknown_job_is_404(live: conftest.Live) -> None:
    r = watch(live, str(uuid.uuid4()), "Running")

    assert r.status_code == 404, r.text
    assert r.json()["error_code"] == "ModelArts.2775"


def test_update_changes_the_description(live: conftest.Live) -> None:
    job_id = live.submit(factories.make_job(command="true"))["metadata"]["id"]

    r = live.http.put(live.path(f"/training-jobs/{job_id}"), json={"description": "first try"})

    assert r.status_code == 200, r.text
    assert live.job(job_id)["metadata"]["description"] == "first try"
    longest = "é" * 256
    r = live.http.put(live.path(f"/training-jobs/{job_id}"), json={"description": longest})
    assert r.status_code == 200, r.text
    assert live.job(job_id)["metadata"]["description"] == longest


def test_update_refuses_257_characters_and_keeps_the_old_description(live: conftest.Live) -> None:
    job_id = live.submit(factories.make_job(command="true"))["metadata"]["id"]
    live.http.put(live.path(f"/training-jobs/{job_id}"), json={"description": "kept"})

    r = live.http.put(live.path(f"/training-jobs/{job_id}"), json={"description": "x" * 257})

    assert r.status_code == 400
    assert r.json()["error_code"] == "ModelArts.2788"
    assert live.job(job_id)["metadata"]["description"] == "kept"


def test_update_shows_in_search_by_description(live: conftest.Live) -> None:
    job_id = live.submit(factories.make_job(name="described", command="true"))["metadata"]["id"]
    live.submit(factories.make_job(name="plain", command="true"))
    live.http.put(live.path(f"/training-jobs/{job_id}"), json={"description": "baseline run"})

    found = search(
        live, filters=[{"key": "description", "operator": "like", "value": ["baseline"]}]
    )

    assert names(found) == ["described"]


# --- DELETE /training-jobs/{id} ----------------------------------------------------------


def test_delete_a_finished_job(live: conftest.Live, tmp_path: pathlib.Path) -> None:
    out = tmp_path / "out"
    job_id = live.submit(
        factories.make_job(
            name="gone",
            command='echo model > "${1#--out=}/model.txt"; :',
            outputs={"out": str(out)},
        )
    )["metadata"]["id"]
    assert live.wait(job_id)["status"]["phase"] == "Completed"
    run_dir = live.settings.runs_dir / job_id
    assert run_dir.exists()

    r = live.http.delete(live.path(f"/training-jobs/{job_id}"))

    assert r.status_code == 202, r.text
    gone = live.http.get(live.path(f"/training-jobs/{job_id}"))
    assert gone.status_code == 404
    assert gone.json()["error_code"] == "ModelArts.2775"
    assert search(live)["total"] == 0
    factories.wait_for(lambda: not run_dir.exists(), what="the job's run directory is removed")
    assert (out / "model.txt").read_text() == "model\n"  # outputs are the user's: kept
    again = live.http.delete(live.path(f"/training-jobs/{job_id}"))
    assert again.status_code == 404


def test_delete_frees_the_name(live: conftest.Live) -> None:
    job_id = live.submit(factories.make_job(name="reused", command="true"))["metadata"]["id"]
    live.wait(job_id)
    assert live.http.delete(live.path(f"/training-jobs/{job_id}")).status_code == 202

    again = live.submit(factories.make_job(name="reused", command="true"))

    assert again["metadata"]["id"] != job_id
    assert names(search(live)) == ["reused"]


def test_delete_a_running_job_stops_it(live: conftest.Live, tmp_path: pathlib.Path) -> None:
    pidfile = tmp_path / "pid"
    job_id = live.submit(factories.make_job(command=pid_job(pidfile)))["metadata"]["id"]
    wait_running(live, job_id)
    pid = int(factories.wait_for(lambda: pidfile.exists() and pidfile.read_text().strip()))
    assert factories.alive(pid)

    r = live.http.delete(live.path(f"/training-jobs/{job_id}"))

    assert r.status_code == 202, r.text
    assert live.http.get(live.path(f"/training-jobs/{job_id}")).status_code == 404
    factories.wait_for(lambda: not factories.alive(pid), what="the deleted job's process ends")
    run_dir = live.settings.runs_dir / job_id
    factories.wait_for(lambda: not run_dir.exists(), what="the deleted job's run directory goes")


def test_delete_a_queued_job_never_starts_it(live: conftest.Live, tmp_path: pathlib.Path) -> None:
    blocker = live.submit(factories.make_job(command="sleep 30", flavor_id="corral.cpu.full"))[
        "metadata"
    ]["id"]
    wait_running(live, blocker)
    marker = tmp_path / "started"
    queued = live.submit(factories.make_job(command=f"touch {marker}"))["metadata"]["id"]
    factories.wait_for(lambda: live.job(queued)["status"]["secondary_phase"] == "Queuing")

    assert live.http.delete(live.path(f"/training-jobs/{queued}")).status_code == 202
    assert terminate(live, blocker).status_code == 202
    live.wait(blocker)

    assert search(live)["total"] == 1
    assert not marker.exists()


# --- POST /training-jobs/{id}/actions ----------------------------------------------------


def test_terminate_a_running_job(live: conftest.Live, tmp_path: pathlib.Path) -> None:
    pidfile = tmp_path / "pid"
    job_id = live.submit(factories.make_job(command=pid_job(pidfile)))["metadata"]["id"]
    wait_running(live, job_id)
    pid = int(factories.wait_for(lambda: pidfile.exists() and pidfile.read_text().strip()))

    r = terminate(live, job_id)

    assert r.status_code == 202, r.text
    assert r.json()["metadata"]["id"] == job_id
    assert r.json()["status"]["phase"] == "Terminating"
    job = live.wait(job_id)
    assert (job["status"]["phase"], job["status"]["secondary_phase"]) == (
        "Terminated",
        "Terminated",
    )
    assert not factories.alive(pid)
    [record] = job["status"]["running_records"]
    assert record["end_at"] >= record["start_at"]
    messages = [e["message"] for e in events(live, job_id)["events"]]
    assert "Termination requested" in messages
    assert messages[-1] == "Job terminated"


def test_terminate_a_queued_job_that_never_ran(live: conftest.Live) -> None:
    blocker = live.submit(factories.make_job(command="sleep 30", flavor_id="corral.cpu.full"))[
        "metadata"
    ]["id"]
    wait_running(live, blocker)
    queued = live.submit(factories.make_job(command="sleep 30"))["metadata"]["id"]
    factories.wait_for(lambda: live.job(queued)["status"]["phase"] == "Pending")

    r = terminate(live, queued)

    assert r.status_code == 202, r.text
    assert r.json()["status"]["phase"] == "Terminating"
    job = live.wait(queued)
    assert job["status"]["phase"] == "Terminated"
    assert job["status"]["running_records"] == []
    assert live.job(blocker)["status"]["phase"] == "Running"


STUBBORN = """\
import os, pathlib, signal, sys, time

def save(*_):
    time.sleep(0.5)  # a checkpoint being written
    pathlib.Path(os.environ["MARKER"]).write_text("saved")
    sys.exit(0)

signal.signal(signal.SIGTERM, signal.SIG_IGN if os.environ["ON_TERM"] == "ignore" else save)
print("ready", flush=True)
time.sleep(60)
"""


def stubborn_job(tmp_path: pathlib.Path, how: str, on_term: str) -> dict[str, Any]:
    """A job running STUBBORN as a boot file or through a shell command."""
    env = {"MARKER": str(tmp_path / "checkpoint"), "ON_TERM": on_term}
    if how == "boot_file":
        return factories.make_job(
            code_dir=factories.write_code(tmp_path, STUBBORN), environments=env
        )
    return factories.make_job(command=py(STUBBORN), environments=env)


def start_stubborn(live: conftest.Live, job: dict[str, Any]) -> str:
    """Submit `job` and wait until it has set up its SIGTERM handling."""
    job_id = live.submit(job)["metadata"]["id"]
    wait_running(live, job_id)
    factories.wait_for(
        lambda: "ready" in preview(live, job_id).json()["content"],
        what="the job has installed its SIGTERM handling",
    )
    return job_id


def test_terminate_twice_while_stopping_is_accepted(tmp_path: pathlib.Path) -> None:
    """A job that ignores SIGTERM stays Terminating for the grace period; asking again is fine."""
    live = conftest.start_live(tmp_path / "home", grace_period=3.0)
    try:
        job_id = start_stubborn(live, stubborn_job(tmp_path, "boot_file", "ignore"))
        assert terminate(live, job_id).status_code == 202

        again = terminate(live, job_id)

        assert again.status_code == 202, again.text
        assert again.json()["status"]["phase"] == "Terminating"
        assert live.wait(job_id)["status"]["phase"] == "Terminated"
    finally:
        conftest.stop_live(live)


@pytest.mark.parametrize("how", ["boot_file", "command"])
def test_terminate_lets_the_job_save_before_the_grace_period_ends(
    tmp_path: pathlib.Path, how: str
) -> None:
    """SIGTERM first: a job that writes a checkpoint on SIGTERM gets to finish writing it."""
    live = conftest.start_live(tmp_path / "home", grace_period=5.0)
    try:
        job_id = start_stubborn(live, stubborn_job(tmp_path, how, "save"))

        assert terminate(live, job_id).status_code == 202

        assert live.wait(job_id)["status"]["phase"] == "Terminated"
        assert (tmp_path / "checkpoint").read_text() == "saved"
    finally:
        conftest.stop_live(live)


def test_terminate_a_finished_job_is_refused(live: conftest.Live) -> None:
    job_id = live.submit(factories.make_job(command="true"))["metadata"]["id"]
    live.wait(job_id)
    before = events(live, job_id)

    r = terminate(live, job_id)

    assert r.status_code == 409
    assert r.json()["error_code"] == "ModelArts.2796"
    assert live.job(job_id)["status"]["phase"] == "Completed"
    assert events(live, job_id) == before


def test_an_unknown_action_is_refused(live: conftest.Live) -> None:
    job_id = live.submit(factories.make_job(command="sleep 30"))["metadata"]["id"]
    wait_running(live, job_id)

    r = live.http.post(live.path(f"/training-jobs/{job_id}/actions"), json={"action_type": "pause"})

    assert r.status_code == 400
    assert r.json()["error_code"] == "ModelArts.2788"
    assert live.job(job_id)["status"]["phase"] == "Running"


# --- POST /training-job-searches ---------------------------------------------------------


@pytest.fixture
def five_jobs(live: conftest.Live) -> dict[str, dict[str, Any]]:
    """alpha-1, alpha-2, beta_1 (fails), gamma-1 finished; delta-1 running."""
    out = {}
    for name, cmd in [
        ("alpha-1", "true"),
        ("alpha-2", "true"),
        ("beta_1", "exit 1"),
        ("gamma-1", "true"),
        ("delta-1", "sleep 30"),
    ]:
        out[name] = live.submit(factories.make_job(name=name, command=cmd))
    for name in ("alpha-1", "alpha-2", "beta_1", "gamma-1"):
        out[name] = live.wait(out[name]["metadata"]["id"])
    out["delta-1"] = wait_running(live, out["delta-1"]["metadata"]["id"])
    return out


def test_search_defaults(live: conftest.Live, five_jobs: dict[str, Any]) -> None:
    found = search(live)

    assert (found["total"], found["count"]) == (5, 5)
    assert (found["offset"], found["limit"]) == (0, 10)
    assert (found["sort_by"], found["order"]) == ("create_time", "desc")
    times = [j["metadata"]["create_time"] for j in found["items"]]
    assert times == sorted(times, reverse=True)
    assert sorted(names(found)) == sorted(five_jobs)
    assert found["items"][0]["status"]["tasks"] == ["worker-0"]  # whole Job objects


def test_search_like_in_not_on_name(live: conftest.Live, five_jobs: dict[str, Any]) -> None:
    def by_name(op: str, *values: str) -> set[str]:
        found = search(live, filters=[{"key": "name", "operator": op, "value": list(values)}])
        assert found["total"] == 5
        assert found["count"] == len(found["items"])
        return set(names(found))

    assert by_name("like", "alpha") == {"alpha-1", "alpha-2"}
    assert by_name("like", "alpha", "gamma") == {"alpha-1", "alpha-2", "gamma-1"}
    assert by_name("like", "_") == {"beta_1"}  # the user's '_' is a character, not a wildcard
    assert by_name("like", "%") == set()
    assert by_name("in", "alpha-1", "delta-1", "nobody") == {"alpha-1", "delta-1"}
    assert by_name("not", "alpha-1", "alpha-2") == {"beta_1", "gamma-1", "delta-1"}


def test_search_on_phase(live: conftest.Live, five_jobs: dict[str, Any]) -> None:
    def by_phase(op: str, *values: str) -> set[str]:
        return set(
            names(search(live, filters=[{"key": "phase", "operator": op, "value": list(values)}]))
        )

    assert by_phase("in", "Failed") == {"beta_1"}
    assert by_phase("in", "Running", "Failed") == {"beta_1", "delta-1"}
    assert by_phase("not", "Completed") == {"beta_1", "delta-1"}
    assert by_phase("in", "Terminated") == set()


def test_search_between_create_times(live: conftest.Live, five_jobs: dict[str, Any]) -> None:
    created = {n: j["metadata"]["create_time"] for n, j in five_jobs.items()}
    lo, hi = created["alpha-2"], created["gamma-1"]

    found = search(live, filters=[{"key": "create_time", "operator": "between", "value": [lo, hi]}])

    assert set(names(found)) == {n for n, t in created.items() if lo <= t <= hi}
    assert {"alpha-2", "beta_1", "gamma-1"} <= set(names(found))
    assert found["count"] == len(found["items"])
    none = search(
        live,
        filters=[
            {"key": "create_time", "operator": "between", "value": [0, min(created.values()) - 1]}
        ],
    )
    assert (none["total"], none["count"], none["items"]) == (5, 0, [])


def test_search_filters_combine(live: conftest.Live, five_jobs: dict[str, Any]) -> None:
    found = search(
        live,
        filters=[
            {"key": "name", "operator": "like", "value": ["1"]},
            {"key": "phase", "operator": "in", "value": ["Completed"]},
        ],
    )

    assert set(names(found)) == {"alpha-1", "gamma-1"}
    assert (found["total"], found["count"]) == (5, 2)


def test_search_sorts(live: conftest.Live, five_jobs: dict[str, Any]) -> None:
    everyone = sorted(five_jobs)

    assert names(search(live, sort_by="name", order="asc")) == everyone
    assert names(search(live, sort_by="name", order="desc")) == everyone[::-1]
    oldest_first = search(live, sort_by="create_time", order="asc")
    times = [j["metadata"]["create_time"] for j in oldest_first["items"]]
    assert times == sorted(times)
    by_phase = [j["status"]["phase"] for j in search(live, sort_by="phase", order="asc")["items"]]
    assert by_phase == sorted(by_phase)


def test_search_offset_counts_pages(live: conftest.Live, five_jobs: dict[str, Any]) -> None:
    everyone = sorted(five_jobs)

    pages = [search(live, sort_by="name", order="asc", limit=2, offset=page) for page in range(4)]

    assert [names(p) for p in pages] == [everyone[0:2], everyone[2:4], everyone[4:5], []]
    assert all((p["total"], p["count"], p["limit"]) == (5, 5, 2) for p in pages)
    assert [p["offset"] for p in pages] == [0, 1, 2, 3]


@pytest.mark.parametrize(("sort_by", "order"), [("name", "asc"), ("create_time", "desc"),
                                             ("phase", "asc"), ("phase", "desc")])
def test_search_cursor_pages_through_every_job_once(
    live: conftest.Live, five_jobs: dict[str, Any], sort_by: str, order: str
) -> None:
    everyone = names(search(live, sort_by=sort_by, order=order, limit=50))
    pages, cursor = [], None
    while True:
        page = search(live, sort_by=sort_by, order=order, limit=2,
                      **({"cursor": cursor} if cursor else {}))
        pages.append(names(page))
        assert (page["total"], page["count"]) == (5, 5)
        cursor = page["next_cursor"]
        if cursor is None:
            break

    assert [n for p in pages for n in p] == everyone  # phases tie: by submission then
    assert [len(p) for p in pages] == [2, 2, 1]


def test_search_cursor_refuses_what_it_cannot_page(
    live: conftest.Live, five_jobs: dict[str, Any]
) -> None:
    cursor = search(live, limit=1)["next_cursor"]
    for body in ({"cursor": "not-a-cursor"}, {"cursor": cursor, "sort_by": "duration"},
                 {"cursor": "WzEsMiwzXQ=="}):  # [1,2,3]
        r = live.http.post(live.path("/training-job-searches"), json=body)
        assert r.status_code == 400, body
        assert "cursor" in r.json()["error_msg"]
    assert search(live, sort_by="duration", limit=1)["next_cursor"] is None


def test_search_limit_bounds(live: conftest.Live, five_jobs: dict[str, Any]) -> None:
    assert len(search(live, limit=1)["items"]) == 1
    assert len(search(live, limit=50)["items"]) == 5
    for bad in (0, 51):
        r = live.http.post(live.path("/training-job-searches"), json={"limit": bad})
        assert r.status_code == 400
        assert r.json()["error_code"] == "ModelArts.2788"


def test_search_does_not_list_deleted_jobs(live: conftest.Live, five_jobs: dict[str, Any]) -> None:
    gone = five_jobs["gamma-1"]["metadata"]["id"]
    assert live.http.delete(live.path(f"/training-jobs/{gone}")).status_code == 202

    found = search(live, limit=50)

    assert found["total"] == 4
    assert "gamma-1" not in names(found)


# --- logs --------------------------------------------------------------------------------


def test_log_preview_of_a_small_log_is_the_whole_log(live: conftest.Live) -> None:
    job_id = live.submit(
        factories.make_job(command=py("for i in range(5): print('line', i)\nprint('naïve ✓')"))
    )["metadata"]["id"]
    live.wait(job_id)
    expected = "".join(f"line {i}\n" for i in range(5)) + "naïve ✓\n"

    r = preview(live, job_id)

    assert r.status_code == 200, r.text
    body = r.json()
    assert body["content"] == expected
    assert body["current_size"] == body["full_size"] == len(expected.encode())


def test_log_preview_of_a_queued_job_is_empty(live: conftest.Live) -> None:
    blocker = live.submit(factories.make_job(command="sleep 30", flavor_id="corral.cpu.full"))[
        "metadata"
    ]["id"]
    wait_running(live, blocker)
    queued = live.submit(factories.make_job(command="echo hi"))["metadata"]["id"]

    r = preview(live, queued)

    assert r.status_code == 200, r.text
    assert r.json() == {"content": "", "current_size": 0, "full_size": 0}


def test_log_preview_of_an_unknown_task_is_404(live: conftest.Live) -> None:
    job_id = live.submit(factories.make_job(command="true"))["metadata"]["id"]
    live.wait(job_id)

    r = preview(live, job_id, task="worker-1")

    assert r.status_code == 404
    assert r.json()["error_code"] == "ModelArts.2775"


def test_log_preview_of_a_big_log_is_its_tail(tmp_path: pathlib.Path) -> None:
    live = conftest.start_live(tmp_path / "home", log_preview_bytes=1000)
    try:
        job_id = live.submit(
            factories.make_job(command=py("for i in range(500): print(f'line {i:05d}')"))
        )["metadata"]["id"]
        assert live.wait(job_id)["status"]["phase"] == "Completed"
        whole = "".join(f"line {i:05d}\n" for i in range(500))

        body = preview(live, job_id).json()

        assert body["full_size"] == len(whole.encode())
        assert 0 < body["current_size"] <= 1000
        assert body["current_size"] == len(body["content"].encode())
        assert whole.endswith(body["content"])
        assert body["content"].endswith("line 00499\n")
        assert "line 00000" not in body["content"]
    finally:
        conftest.stop_live(live)


def read_log(live: conftest.Live, job_id: str, **params: Any) -> dict[str, Any]:
    r = live.http.get(live.path(f"/training-jobs/{job_id}/tasks/worker-0/logs"), params=params)
    assert r.status_code == 200, r.text
    return dict(r.json())


def test_follow_a_growing_log(live: conftest.Live) -> None:
    """Read from next_offset until finished: the pieces add up to the whole log, once."""
    job_id = live.submit(
        factories.make_job(
            command=py(
                "import time\nfor i in range(8):\n    print('step', i, flush=True)\n"
                "    time.sleep(0.1)"
            )
        )
    )["metadata"]["id"]
    wait_running(live, job_id)
    text, offset = "", 0
    deadline = time.monotonic() + 30

    while True:
        chunk = read_log(live, job_id, offset=offset)
        assert chunk["offset"] == offset
        assert chunk["next_offset"] == offset + len(chunk["content"].encode())
        text += chunk["content"]
        offset = chunk["next_offset"]
        if chunk["finished"]:
            break
        assert time.monotonic() < deadline, "the log never finished"
        time.sleep(0.05)

    assert text == "".join(f"step {i}\n" for i in range(8))
    assert chunk["full_size"] == offset
    assert chunk["attempt"] == 1
    past = read_log(live, job_id, offset=offset + 100)
    assert (past["content"], past["next_offset"], past["finished"]) == ("", offset, True)


def test_logs_of_each_attempt(live: conftest.Live) -> None:
    job_id = live.submit(
        factories.make_job(command='echo "attempt $CORRAL_ATTEMPT"; exit 1', retries=1,
                           fault_tolerance={"backoff": {"initial": 0}})
    )["metadata"]["id"]
    job = live.wait(job_id)
    assert job["status"]["phase"] == "Failed"
    first, second = job["status"]["running_records"]
    assert first["end_recover"] == "proc_restart"
    assert second["start_type"] == "restarted"

    latest = read_log(live, job_id)
    one = read_log(live, job_id, attempt=1)

    assert (latest["attempt"], latest["content"], latest["finished"]) == (2, "attempt 2\n", True)
    assert (one["attempt"], one["content"], one["finished"]) == (1, "attempt 1\n", True)
    assert preview(live, job_id).json()["content"] == "attempt 2\n"


# --- GET /training-jobs/{id}/metrics/{task} ----------------------------------------------


def metrics(live: conftest.Live, job_id: str, task: str = "worker-0") -> dict[str, list[float]]:
    r = live.http.get(live.path(f"/training-jobs/{job_id}/metrics/{task}"))
    assert r.status_code == 200, r.text
    body = r.json()
    series = {m["metric"]: m["value"] for m in body["metrics"]}
    assert all(len(v) == len(body["times"]) for v in series.values())
    return series


def test_metrics_of_a_busy_job_show_cpu_use(live: conftest.Live) -> None:
    job_id = live.submit(factories.make_job(command=py("while True: pass")))["metadata"]["id"]
    wait_running(live, job_id)

    series = factories.wait_for(
        lambda: (s := metrics(live, job_id))["cpuUsage"] and max(s["cpuUsage"]) > 0 and s,
        what="cpuUsage above 0",
    )

    assert set(series) >= METRICS
    assert max(series["memUsage"]) > 0
    assert all(v >= 0 for v in series["gpuUtil"] + series["gpuMemUsage"])


def test_metrics_of_a_queued_job_are_empty_series(live: conftest.Live) -> None:
    blocker = live.submit(factories.make_job(command="sleep 30", flavor_id="corral.cpu.full"))[
        "metadata"
    ]["id"]
    wait_running(live, blocker)
    queued = live.submit(factories.make_job(command="true"))["metadata"]["id"]

    series = metrics(live, queued)

    assert set(series) >= METRICS
    assert all(v == [] for v in series.values())


def test_metrics_of_an_unknown_task_is_404(live: conftest.Live) -> None:
    job_id = live.submit(factories.make_job(command="true"))["metadata"]["id"]

    r = live.http.get(live.path(f"/training-jobs/{job_id}/metrics/worker-7"))

    assert r.status_code == 404
    assert r.json()["error_code"] == "ModelArts.2775"


# --- GET /training-jobs/{id}/events ------------------------------------------------------


def test_events_of_a_completed_job(live: conftest.Live) -> None:
    job_id = live.submit(factories.make_job(command="true"))["metadata"]["id"]
    live.wait(job_id)

    found = events(live, job_id, limit=100)

    assert found["total"] == len(found["events"]) >= 4
    assert (found["offset"], found["limit"], found["order"]) == (0, 100, "asc")
    messages = [e["message"] for e in found["events"]]
    assert messages[0].startswith("Job created")
    assert messages[-1] == "Job completed"
    assert any(m.startswith("Job started") for m in messages)
    for e in found["events"]:
        assert set(e) >= {"message", "level", "time", "source"}
        assert e["level"] in {"Info", "Warning", "Error"}
        assert e["time"].isdigit()
    times = [int(e["time"]) for e in found["events"]]
    assert times == sorted(times)


def test_events_page_and_order(live: conftest.Live) -> None:
    job_id = live.submit(factories.make_job(command="true"))["metadata"]["id"]
    live.wait(job_id)
    everything = events(live, job_id, limit=100)["events"]

    pages = [events(live, job_id, offset=off, limit=2) for off in range(0, len(everything), 2)]

    assert [e for p in pages for e in p["events"]] == everything
    assert all(p["total"] == len(everything) for p in pages)
    assert events(live, job_id, order="desc", limit=100)["events"] == everything[::-1]
    assert events(live, job_id, offset=len(everything))["events"] == []


def test_events_filter_by_level_pattern_and_time(live: conftest.Live) -> None:
    job_id = live.submit(factories.make_job(command="exit 1"))["metadata"]["id"]
    live.wait(job_id)
    everything = events(live, job_id, limit=100)["events"]

    errors = events(live, job_id, level="Error")
    warnings = events(live, job_id, level="Warning")
    exited = events(live, job_id, pattern="exited with code 1")

    assert errors["events"] and all(e["level"] == "Error" for e in errors["events"])
    assert errors["total"] == len(errors["events"])
    assert any("Job failed" in e["message"] for e in errors["events"])
    assert warnings["events"] and all(e["level"] == "Warning" for e in warnings["events"])
    assert [e["message"] for e in exited["events"]] == ["Task worker-0 exited with code 1"]
    first, last = int(everything[0]["time"]), int(everything[-1]["time"])
    window = events(live, job_id, start_time=first, end_time=last, limit=100)
    assert window["events"] == everything
    assert (window["start_time"], window["end_time"]) == (str(first), str(last))
    assert events(live, job_id, start_time=0, end_time=first - 1)["events"] == []


def test_events_tell_why_a_job_waits(live: conftest.Live) -> None:
    blocker = live.submit(factories.make_job(command="sleep 30", flavor_id="corral.cpu.full"))[
        "metadata"
    ]["id"]
    wait_running(live, blocker)
    queued = live.submit(factories.make_job(command="true"))["metadata"]["id"]

    warned = factories.wait_for(
        lambda: events(live, queued, level="Warning")["events"], what="a warning about waiting"
    )

    job = live.job(queued)
    assert (job["status"]["phase"], job["status"]["secondary_phase"]) == ("Pending", "Queuing")
    assert job["status"]["reason"]
    assert warned[0]["message"].startswith("waiting for resources")


# --- catalog -----------------------------------------------------------------------------


def flavors(live: conftest.Live, **params: Any) -> dict[str, Any]:
    r = live.http.get(live.path("/training-job-flavors"), params=params)
    assert r.status_code == 200, r.text
    return dict(r.json())


def test_flavors(live: conftest.Live) -> None:
    found = flavors(live)
    info = live.http.get("/corral/info").json()

    assert found["total_count"] == len(found["flavors"])
    by_id = {f["flavor_id"]: f for f in found["flavors"]}
    assert {"corral.cpu.1u", "corral.cpu.full"} <= set(by_id)
    assert by_id["corral.cpu.1u"]["flavor_info"]["cpu"]["core_num"] == 1
    assert by_id["corral.cpu.full"]["flavor_info"]["cpu"]["core_num"] == info["nodes"][0]["cpu"]
    for f in found["flavors"]:
        assert f["flavor_name"]
        assert f["flavor_type"] in {"CPU", "GPU"}
        assert f["billing"]["code"] == f["flavor_id"]
        assert f["flavor_info"]["max_num"] >= 1
        assert f["flavor_info"]["memory"]["size"] >= 1
        assert f["flavor_info"]["memory"]["unit"] == "GB"
        if f["flavor_type"] == "GPU":
            assert f["flavor_info"]["gpu"]["unit_num"] >= 1


def test_flavors_by_type(live: conftest.Live) -> None:
    everything = flavors(live)["flavors"]

    cpu = flavors(live, flavor_type="CPU")
    gpu = flavors(live, flavor_type="GPU")

    assert cpu["flavors"] and all(f["flavor_type"] == "CPU" for f in cpu["flavors"])
    assert all(f["flavor_type"] == "GPU" for f in gpu["flavors"])
    assert cpu["total_count"] + gpu["total_count"] == len(everything)
    assert sorted(f["flavor_id"] for f in cpu["flavors"] + gpu["flavors"]) == sorted(
        f["flavor_id"] for f in everything
    )
    r = live.http.get(live.path("/training-job-flavors"), params={"flavor_type": "NPU"})
    assert r.status_code == 400
    assert r.json()["error_code"] == "ModelArts.2788"


def test_engines(live: conftest.Live) -> None:
    r = live.http.get(live.path("/training-job-engines"))

    assert r.status_code == 200, r.text
    body = r.json()
    assert body["total"] == len(body["items"]) >= 1
    default = body["items"][0]
    assert default["engine_name"] == "Python"
    assert default["engine_version"].startswith(f"{sys.version_info.major}.")
    assert os.path.isfile(default["image_info"]["python"])


def test_info(live: conftest.Live) -> None:
    r = live.http.get("/corral/info")

    assert r.status_code == 200, r.text
    info = r.json()
    assert re.fullmatch(r"[0-9a-f]{32}", info["default_project_id"])
    assert info["default_project_id"] == live.project_id
    assert info["version"]
    assert info["database"] == "sqlite"
    assert pathlib.Path(info["home"]) == live.settings.home
    [node] = info["nodes"]
    assert node["cpu"] >= 1 and node["memory_mb"] > 0 and node["gpus"] >= 0
    # a lone server leads from its start
    leader = info["leader"]
    assert leader["server"] == info["server"] and leader["this_server"]
    assert leader["url"] == live.url and leader["epoch"] >= 1 and leader["since"] > 0


def test_node_usage_over_time(live: conftest.Live) -> None:
    """The Nodes page's charts: this machine's own use, sampled by the scheduling server
    from its start (whether or not anything runs), every sampling.NODE_INTERVAL_S."""

    def local() -> dict[str, Any] | None:
        r = live.http.get("/corral/node-usage", params={"minutes": 5})
        assert r.status_code == 200, r.text
        [node] = r.json()["nodes"]
        return node if node["times"] else None

    node = factories.wait_for(local, timeout=20, what="a sample of this machine")
    info = live.http.get("/corral/info").json()["nodes"][0]
    assert (node["name"], node["cpu"], node["memory_mb"]) == (
        info["name"], info["cpu"], info["memory_mb"])
    n = len(node["times"])
    assert len(node["cpu_percent"]) == len(node["mem_mb"]) == n
    assert all(0 <= c <= 100 for c in node["cpu_percent"])
    assert all(m > 0 for m in node["mem_mb"])
    if node["gpus"]:
        assert node["gpu_util"] is not None and len(node["gpu_mem_mb"]) == n
    else:
        assert node["gpu_util"] is None and node["gpu_memory_mb"] == 0

    for bad in ({"minutes": 0}, {"minutes": 1441}, {"points": 5}):
        r = live.http.get("/corral/node-usage", params=bad)
        assert r.status_code == 400, r.text
        assert r.json()["error_code"] and r.json()["error_msg"]
    assert conftest.http_client(live.url).get("/corral/node-usage").status_code == 401
    # the SDK's call for it (the CLI's client)
    sdk = client.Client(live.url, token=live.login.token)
    assert [n["name"] for n in sdk.node_usage(minutes=5)["nodes"]] == [node["name"]]


# --- /openapi.json -----------------------------------------------------------------------

DOCUMENTED = {
    "/v2/{project_id}/training-jobs": {"post"},
    "/v2/{project_id}/training-jobs/{training_job_id}": {"get", "put", "delete"},
    "/v2/{project_id}/training-jobs/{training_job_id}/actions": {"post"},
    "/v2/{project_id}/training-job-searches": {"post"},
    "/v2/{project_id}/training-jobs/{training_job_id}/tasks/{task_id}/logs/preview": {"get"},
    "/v2/{project_id}/training-jobs/{training_job_id}/tasks/{task_id}/logs": {"get"},
    "/v2/{project_id}/training-jobs/{training_job_id}/metrics/{task_id}": {"get"},
    "/v2/{project_id}/training-jobs/{training_job_id}/events": {"get"},
    "/v2/{project_id}/training-job-flavors": {"get"},
    "/v2/{project_id}/training-job-engines": {"get"},
    "/corral/info": {"get"},
    "/corral/node-usage": {"get"},
}
ERROR_REF = "#/components/schemas/ErrorBody"


def openapi(live: conftest.Live) -> dict[str, Any]:
    r = live.http.get("/openapi.json")
    assert r.status_code == 200, r.text
    return dict(r.json())


def error_schemas(op: dict[str, Any]) -> dict[str, Any]:
    return {
        code: resp.get("content", {}).get("application/json", {}).get("schema")
        for code, resp in op["responses"].items()
        if code[0] in "45"
    }


def test_openapi_describes_every_endpoint(live: conftest.Live) -> None:
    spec = openapi(live)

    for path, methods in DOCUMENTED.items():
        assert path in spec["paths"], path
        assert methods <= set(spec["paths"][path]), (path, spec["paths"][path].keys())
    body = spec["components"]["schemas"]["ErrorBody"]
    assert set(body["properties"]) == {"error_code", "error_msg"}
    for path, methods in DOCUMENTED.items():
        if path.startswith("/v2/"):
            for method in methods:
                errors = error_schemas(spec["paths"][path][method])
                assert {"$ref": ERROR_REF} in errors.values(), (method, path)


def test_openapi_documents_only_the_error_body_the_server_sends(live: conftest.Live) -> None:
    """Validation errors come back as 400 + ErrorBody, so no 422 shape may be promised."""
    spec = openapi(live)

    promised = {
        (method, path, code): schema
        for path, ops in spec["paths"].items()
        for method, op in ops.items()
        for code, schema in error_schemas(op).items()
        if schema != {"$ref": ERROR_REF}
    }

    assert promised == {}


def test_a_waiting_job_says_how_many_jobs_are_ahead_of_it(live: conftest.Live) -> None:
    running = live.submit(factories.make_job(command="sleep 30", flavor_id="corral.cpu.full"))
    live.wait(running["metadata"]["id"], {"Running"})
    head = live.submit(factories.make_job(command="sleep 30", flavor_id="corral.cpu.full"))
    behind = live.submit(factories.make_job(name="behind", command="sleep 30"))
    behind_id = behind["metadata"]["id"]

    factories.wait_for(lambda: (live.job(head["metadata"]["id"])["status"]["reason"] or "")
                       .startswith("waiting for resources"), what="the head to say why it waits")
    # (A pass that no user asked for may come a moment later while jobs are handed out.)
    factories.wait_for(lambda: live.job(behind_id)["status"]["reason"],
                       what="the job behind to say why it waits")
    assert live.job(behind_id)["status"]["reason"] == "queued: 1 job(s) ahead"
    [listed] = search(live, filters=[{"key": "name", "operator": "in", "value": ["behind"]}])[
        "items"]
    assert listed["status"]["reason"] == "queued: 1 job(s) ahead"
