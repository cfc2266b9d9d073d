"""A Ray cluster that cannot be reached: at start the server exits at once, naming the
address; while it runs it keeps serving, counts the cluster's tasks as lost with their
nodes (their jobs are queued again), and carries on once the cluster answers again.

The cluster here is a `ray start --head --block` of this test's own (own temp dir, own
process group), killed outright and started again on the same port: a new cluster, as a
head that died without persistent GCS storage comes back.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest

from tests import factories
from tests.conftest import Live, start_live, stop_live

pytest.importorskip("ray")

pytestmark = [pytest.mark.ray, pytest.mark.timeout(300)]
CLI = "from corral.cli import main; main.main()"
RAY = str(pathlib.Path(sys.executable).parent / "ray")


def corral_server(home: pathlib.Path, *args: str, **env: str) -> tuple[int, str, float]:
    """`corral server ARGS` until it exits: (exit code, stderr, seconds)."""
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("CORRAL_", "RAY_ADDRESS"))}
    clean.update(CORRAL_HOME=str(home), CORRAL_PORT="0", **env)
    started = time.monotonic()
    out = subprocess.run([sys.executable, "-c", CLI, "server", *args], env=clean,
                         capture_output=True, text=True, timeout=60)
    return out.returncode, out.stderr, time.monotonic() - started


def test_an_address_nothing_listens_on_stops_the_server_at_once(
        tmp_path: pathlib.Path) -> None:
    rc, err, took = corral_server(tmp_path / "a", "--ray", "ray://127.0.0.1:1")
    assert rc == 1 and took < 30, err
    assert "cannot reach the Ray cluster at ray://127.0.0.1:1: connection refused" in err
    assert "Traceback" not in err
    rc, err, took = corral_server(tmp_path / "b", CORRAL_RAY_ADDRESS="127.0.0.1:1")
    assert rc == 1 and took < 30, err
    assert "cannot reach the Ray cluster at 127.0.0.1:1: connection refused" in err
    # Nothing was written: a later start with a good address is a first start.
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_an_address_that_never_answers_gives_up_after_the_connect_timeout(
        tmp_path: pathlib.Path) -> None:
    # Something accepts connections there but never speaks Ray: Ray alone would retry on.
    with socket.create_server(("127.0.0.1", 0), backlog=16) as mute:
        port = mute.getsockname()[1]
        rc, err, took = corral_server(tmp_path / "home", CORRAL_RAY_ADDRESS=f"127.0.0.1:{port}",
                                      CORRAL_RAY_CONNECT_TIMEOUT="3")
    assert rc == 1 and 3 <= took < 20, err
    assert (f"cannot reach the Ray cluster at 127.0.0.1:{port} within 3 s "
            "(ray_connect_timeout)") in err
    assert not (tmp_path / "home").exists()


class Head:
    """A one-node Ray cluster on a fixed port, in a process group of its own."""

    def __init__(self, port: int) -> None:
        self.port = port
        # Ray's own start gives up when its GCS does not answer within 45 s, which a
        # 2-core machine busy with the other tests' worker has been seen to cause (in CI,
        # for the second head: once, then twice in a row in a later run; the cause not
        # found, the raylet's and GCS's logs are in the message from now on): two more
        # tries before the test fails on it.
        for tries_left in (2, 1, 0):
            self._start()
            try:
                factories.wait_for(self._started, timeout=60,
                                   what=f"the Ray head to start (log: {self.log})")
                return
            except AssertionError:
                if not tries_left:
                    raise
                self.kill()

    def _start(self) -> None:
        self.tmp = tempfile.mkdtemp(prefix="cro-", dir="/tmp")  # short: unix sockets
        env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_TMPDIR": self.tmp}
        self.log = pathlib.Path(self.tmp) / "head.log"
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [RAY, "start", "--head", f"--port={self.port}", "--num-cpus=2",
                 f"--memory={2 * 2**30}", f"--object-store-memory={80 * 2**20}",
                 f"--temp-dir={self.tmp}", "--include-dashboard=false",
                 "--disable-usage-stats", "--block"],
                env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def _started(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"the Ray head did not start: {self.log.read_text()[-2000:]}"
                                 f"{self._process_logs()}")
        return b"Ray runtime started" in self.log.read_bytes()

    def _process_logs(self) -> str:
        """The ends of the raylet's and the GCS's own logs: why a start timed out."""
        found = []
        for name in ("raylet.out", "raylet.err", "gcs_server.out", "gcs_server.err"):
            path = pathlib.Path(self.tmp, "session_latest", "logs", name)
            if path.exists():
                found.append(f"\n--- {name}:\n{path.read_text(errors='replace')[-1500:]}")
        return "".join(found)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def kill(self) -> None:
        """Every process of the cluster, at once (a machine that died)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        for pid in _pids_mentioning(self.tmp):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        shutil.rmtree(self.tmp, ignore_errors=True)


@pytest.fixture
def port() -> int:
    return factories.free_port()


def test_the_server_outlives_its_cluster_and_carries_on_when_it_is_back(
        tmp_path: pathlib.Path, port: int) -> None:
    head = Head(port)
    live = start_live(tmp_path / "home", ray_address=head.address, ray_lost_after=2,
                      flavors=[{"flavor_id": "cpu1", "cpu": 1, "memory_gb": 1}])
    job_id = ""
    try:
        code = factories.write_code(tmp_path, """
import os, time
if os.environ["CORRAL_ATTEMPT"] == "1":
    print("started", flush=True)
    time.sleep(600)
print("second attempt")
""")
        job_id = live.submit(factories.make_job(code_dir=code, flavor_id="cpu1",
                                                retries=0))["metadata"]["id"]
        factories.wait_for(lambda: "started" in _log(live, job_id), timeout=60,
                           what="the job to start")

        head.kill()
        # The API goes on answering; the job's node is lost with the cluster: queued again.
        queued = factories.wait_for(
            lambda: (j := live.job(job_id))["status"]["phase"] == "Pending" and j,
            timeout=60, what="the job to be queued again")
        lost = queued["status"]["running_records"][0]
        assert (lost["end_reason"], lost["failure_class"]) == ("node lost", "node_lost")
        pools = live.http.get(live.path("/training-pools")).json()["pools"]
        assert [p["nodes"] for p in pools] == [[]]
        events = live.http.get(live.path(f"/training-jobs/{job_id}/events")).json()
        assert any("unreachable" in e["message"] for e in events["events"])

        head = Head(port)  # a new cluster on the same address
        done = live.wait(job_id, timeout=90)
        assert done["status"]["phase"] == "Completed", done["status"]
        first, second = done["status"]["running_records"]
        # The node's loss was the infrastructure's: it spent none of the job's 0 retries.
        assert (first["end_reason"], first["end_recover"], first["failure_class"]) == (
            "node lost", "job_reschedule", "node_lost")
        assert second["start_type"] == "init_or_rescheduled"
        assert "second attempt" in _log(live, job_id, attempt=2)
    finally:
        stop_live(live)
        head.kill()
        for pid in _pids_mentioning(f"CORRAL_JOB_ID={job_id}", environ=True) if job_id else ():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _log(live: Live, job_id: str, attempt: int = 1) -> str:
    r = live.http.get(live.path(
        f"/training-jobs/{job_id}/tasks/worker-0/logs?offset=0&attempt={attempt}"))
    return str(r.json().get("content", "")) if r.status_code == 200 else ""


def _pids_mentioning(text: str, *, environ: bool = False) -> list[int]:
    """Processes whose command line (or environment) holds `text`."""
    out = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            raw = pathlib.Path(f"/proc/{entry.name}/{'environ' if environ else 'cmdline'}")
            data = raw.read_bytes()
        except OSError:
            continue
        if (text.encode() in data.split(b"\0")) if environ else (text.encode() in data):
            out.append(int(entry.name))
    return out
