"""kill -9 of the server during each stage of an incremental-learning round, on SQLite and
PostgreSQL: the loop goes on where it was, and no job of a round (nor its service) is
started twice."""

from __future__ import annotations

import collections
import pathlib
import time
from collections.abc import Iterator

import pytest

from tests import factories
from tests.integration import il_live
from tests.integration.test_crash import ServerProcess, kill_jobs

pytestmark = pytest.mark.slow


@pytest.fixture
def server(tmp_path: pathlib.Path, db_url: str,
           monkeypatch: pytest.MonkeyPatch) -> Iterator[ServerProcess]:
    monkeypatch.setenv("CORRAL_STORAGE_INTERVAL", "0.2")
    srv = ServerProcess(tmp_path / "home", db_url)
    shared = tmp_path / "work" / "shared"
    try:
        yield srv
    finally:
        srv.kill()
        srv.http.close()
        shared.mkdir(parents=True, exist_ok=True)
        kill_jobs(db_url, shared)


def restart(server: ServerProcess) -> None:
    server.kill()
    server.start()


def hold(il: il_live.IL, stage: str) -> pathlib.Path:
    gate = il.shared / f"hold-{stage}"
    gate.touch()
    return gate


def test_kill_9_in_every_stage_goes_on_and_runs_each_job_once(
        server: ServerProcess, tmp_path: pathlib.Path) -> None:
    server.start()
    il = il_live.IL(server.http, server.project_id, tmp_path / "work")
    il.initial_model("m", accuracy=0.5)
    il.dataset("stream")
    il.create(il.spec())
    factories.wait_for(lambda: il.show()["status"]["deploys"][0]["state"] == "Loaded", 30,
                       "the service to load the initial model")

    # Training: killed while the train job runs; it ends while no server is there.
    gate = hold(il, "train")
    il.append(["0.8"] * 4)
    factories.wait_for(lambda: ("train", 1) in [r[:2] for r in il.runs()], 30, "train 1")
    server.kill()
    gate.unlink()
    time.sleep(0.5)
    server.start()
    # Evaluating: killed while the evaluation runs.
    gate = hold(il, "eval")
    factories.wait_for(lambda: ("eval", 1) in [r[:2] for r in il.runs()], 30, "eval 1")
    restart(server)
    gate.unlink()
    # Deploying: killed while the service has not acknowledged the new model yet.
    gate = hold(il, "ack")
    il.wait_round(1, {"Deploying"})
    restart(server)
    gate.unlink()
    first = il.wait_round(1, {"Promoted", "Rejected", "Failed"})
    assert first["state"] == "Promoted", first

    # And at whatever moment: twice within a round's first seconds.
    il.append(["0.9"] * 4)
    for pause in (0.3, 0.8):
        time.sleep(pause)
        restart(server)
    second = il.wait_round(2, {"Promoted", "Rejected", "Failed"})
    assert second["state"] == "Promoted", second

    started = collections.Counter(r[:2] for r in il.runs())
    assert started == {("train", 1): 1, ("eval", 1): 1, ("train", 2): 1, ("eval", 2): 1,
                       ("serve", 0): 1}, started
    assert il.alias()["version"] == 3
    log = il.service_log_with("m-v3 accuracy=0.9")
    assert "m-v2 accuracy=0.8" in log
    names = [j["metadata"]["name"] for j in server.all_jobs()]
    assert sorted(n for n in names if n.startswith("loop-")) == [
        "loop-round-1-eval", "loop-round-1-train", "loop-round-2-eval", "loop-round-2-train",
        "loop-serve-1"]
