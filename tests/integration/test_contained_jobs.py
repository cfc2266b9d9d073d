"""Jobs through a live server: what their tasks start dies with them, a job over its
flavor's memory fails `out of memory`, a chatty job's log is capped and says so, and a
server killed while a job runs still kills what the job's task left."""

from __future__ import annotations

import contextlib
import os
import pathlib
import signal
from collections.abc import Iterator
from typing import Any

import psutil
import pytest

from corral.executors import base
from tests import conftest, factories
from tests.integration import test_crash

Live = conftest.Live
#: commands that start `sleep 1000` out of the task's session (and, the first, with no
#: environment, so no marker finds it), writing its pid to $STATE/escaped
ESCAPES = {
    "session and environment": "setsid env -i sleep 1000 &",
    "session": "setsid sleep 1000 &",
}


@pytest.fixture
def live(tmp_path: pathlib.Path) -> Iterator[Live]:
    server = conftest.start_live(tmp_path / "home", cpus=2, memory_gb=8, flavors=[
        {"flavor_id": "corral.cpu.1u", "cpu": 1, "memory_gb": 2},
        {"flavor_id": "small", "cpu": 1, "memory_gb": 1}])
    yield server
    conftest.stop_live(server)


def escaping_job(state: pathlib.Path, how: str, **overrides: Any) -> dict[str, Any]:
    command = (f"{ESCAPES[how]} echo $! > {state}/escaped; "
               f"while [ ! -e {state}/go ]; do sleep 0.05; done; true")
    return factories.make_job(command=command, **overrides)


def escaped(state: pathlib.Path) -> int:
    """The escaped process's pid, once it runs `sleep` in a session of its own."""
    path = state / "escaped"

    def running() -> int | None:
        text = path.read_text().strip() if path.exists() else ""
        with contextlib.suppress(psutil.Error, ValueError):
            proc = psutil.Process(int(text))
            if proc.cmdline()[:1] == ["sleep"] and os.getsid(proc.pid) == proc.pid:
                return proc.pid
        return None

    pid: int = factories.wait_for(running, 20, "the escaped process to run")
    return pid


def kill(pid: int) -> None:
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)


def events(live: Live, job_id: str) -> list[str]:
    r = live.http.get(live.path(f"/training-jobs/{job_id}/events"), params={"limit": 100})
    assert r.status_code == 200, r.text
    return [e["message"] for e in r.json()["events"]]


@pytest.mark.parametrize("end", ["stopped", "completed"])
@pytest.mark.parametrize("how", sorted(ESCAPES))
def test_nothing_a_job_started_outlives_it(live: Live, tmp_path: pathlib.Path, how: str,
                                           end: str) -> None:
    job_id = live.submit(escaping_job(tmp_path, how))["metadata"]["id"]
    pid = escaped(tmp_path)
    try:
        if end == "stopped":
            r = live.http.post(live.path(f"/training-jobs/{job_id}/actions"),
                               json={"action_type": "terminate"})
            assert r.status_code == 202, r.text
        else:
            (tmp_path / "go").touch()
        job = live.wait(job_id)

        assert job["status"]["phase"] == ("Terminated" if end == "stopped" else "Completed")
        factories.wait_for(lambda: not factories.alive(pid), 10, f"{pid} to be killed")
    finally:
        kill(pid)


def test_a_job_over_its_flavor_memory_fails_out_of_memory(live: Live) -> None:
    executor = live.embedded.platform.executor
    assert isinstance(executor, base.Contains)
    if "memory limited" not in executor.containment():
        pytest.skip("this machine gives the server no cgroup memory controller")
    # 2 GiB touched, in a flavor of 1 GiB
    body = factories.make_job(command="python3 -c \"big = b'x' * (2 << 30); print('kept')\"",
                              flavor_id="small")

    job = live.wait(live.submit(body)["metadata"]["id"])

    status = job["status"]
    assert (status["phase"], status["failure_class"]) == ("Failed", "out_of_memory")
    assert "out of memory" in status["reason"] and "1024 MB" in status["reason"]
    assert status["task_statuses"][0]["exit_code"] == 137
    assert any("out of memory" in e for e in events(live, job["metadata"]["id"]))


def test_a_chatty_job_keeps_the_head_and_tail_of_its_log_and_says_so(live: Live) -> None:
    """The default cap (100 MB): 150 MB written as fast as `yes` can."""
    body = factories.make_job(
        command="echo first-line; yes corral-log-line | head -c 157286400; echo; echo last-line")

    job = live.wait(live.submit(body)["metadata"]["id"], timeout=120)

    assert job["status"]["phase"] == "Completed"
    job_id = job["metadata"]["id"]
    logs = live.path(f"/training-jobs/{job_id}/tasks/worker-0/logs")
    head = live.http.get(logs, params={"offset": 0}).json()
    assert head["content"].startswith("first-line\ncorral-log-line\n")
    assert 100 * 2**20 < head["full_size"] <= 100 * 2**20 + 1024
    tail = live.http.get(logs, params={"offset": head["full_size"] - 4096}).json()
    assert tail["content"].endswith("corral-log-line\n\nlast-line\n")
    capped = [e for e in events(live, job_id) if e.startswith("log of worker-0 capped")]
    assert capped == ["log of worker-0 capped: 50.0 MB dropped"]


def test_a_server_killed_while_a_task_runs_still_kills_what_it_left(
        tmp_path: pathlib.Path) -> None:
    server = test_crash.ServerProcess(tmp_path / "home", f"sqlite:///{tmp_path / 'state.db'}")
    server.start()
    pid = 0
    try:
        r = server.http.post(f"/v2/{server.project_id}/training-jobs",
                             json=escaping_job(tmp_path, "session and environment"))
        assert r.status_code == 201, r.text
        job_id = r.json()["metadata"]["id"]
        pid = escaped(tmp_path)

        server.kill()
        server.start()
        r = server.http.post(f"/v2/{server.project_id}/training-jobs/{job_id}/actions",
                             json={"action_type": "terminate"})
        assert r.status_code == 202, r.text
        job = factories.wait_for(lambda: _ended(server, job_id), 30, "the job to stop")

        assert job["status"]["phase"] == "Terminated"
        factories.wait_for(lambda: not factories.alive(pid), 10, f"{pid} to be killed")
        assert "task containment:" in server.log.read_text()
    finally:
        kill(pid)
        server.kill()


def _ended(server: test_crash.ServerProcess, job_id: str) -> dict[str, Any] | None:
    job: dict[str, Any] = server.http.get(
        f"/v2/{server.project_id}/training-jobs/{job_id}").json()
    return job if job["status"]["phase"] in conftest.TERMINAL else None
