"""Incremental-learning loops end to end on a live server, SQLite and PostgreSQL, with real
worker processes: rounds promoted and rejected, the service hot-reloading in every round,
a rollback, a service replaced without hot update, failing rounds and maxFailedRounds."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest

from tests import conftest, factories
from tests.integration import il_live

pytestmark = pytest.mark.slow


@pytest.fixture
def il(tmp_path: pathlib.Path, db_url: str) -> Iterator[il_live.IL]:
    live = conftest.start_live(tmp_path / "home", database_url=db_url, cpus=4,
                               storage_interval=0.2)
    try:
        world = il_live.IL(live.http, live.project_id, tmp_path / "work")
        world.initial_model("m", accuracy=0.5)
        world.dataset("stream")
        yield world
    finally:
        conftest.stop_live(live)


def test_rounds_are_promoted_and_rejected_and_the_service_reloads_each_time(
        il: il_live.IL) -> None:
    il.create(il.spec())
    for number, value in enumerate(("0.6", "0.7", "0.8"), 1):
        il.append([value] * 4)  # 2 for training, 2 for evaluation
        done = il.wait_round(number, {"Promoted", "Rejected", "Failed"})
        assert done["state"] == "Promoted", done
        assert done["deploy"]["state"] == "Loaded"
        il.service_log_with(f"m-v{number + 1} accuracy={value}")
    il.append(["0.1"] * 4)
    rejected = il.wait_round(4, {"Promoted", "Rejected", "Failed"})
    assert rejected["state"] == "Rejected" and rejected["decision"] == "reject"
    assert rejected["rule"] == "accuracy_delta > 0: -0.7 does not hold"
    assert rejected["metrics"] == {"new": {"accuracy": 0.1}, "current": {"accuracy": 0.8}}
    assert (rejected["base_model"], rejected["current_model"]) == ("m v4", "m v4")
    status = il.show()["status"]
    assert status["model"]["version"] == 4
    assert status["conditions"][-2]["type"] == "Rejected"
    # One service all along: it reloaded, it was never restarted.
    assert [r[0] for r in il.runs()].count("serve") == 1
    log = il.service_log_with("m-v4")
    assert [line.split()[1].rsplit("/", 1)[1] for line in log.splitlines()
            if line.startswith("reloaded")] == ["m-v1", "m-v2", "m-v3", "m-v4"]

    il.act("rollback", reason="round 3 was not that good")
    il.wait_state("Waiting")
    history = il.alias()
    assert history["version"] == 3
    assert [(m["from_version"], m["to_version"]) for m in history["history"]] == [
        (None, 2), (2, 3), (3, 4), (4, 3)]
    assert history["history"][-1]["reason"] == "rollback by admin: round 3 was not that good"
    reloaded = f"reloaded {il.root / 'out' / 'deploy' / 'models' / 'm-v3'}"
    factories.wait_for(lambda: il.service_log().splitlines()[-1].startswith(reloaded),
                       timeout=30, what="the service to reload the rolled-back model")


def test_without_hot_update_the_service_is_replaced_by_one_of_the_new_model(
        il: il_live.IL) -> None:
    il.create(il.spec(hot=False))
    il.append(["0.9"] * 4)
    done = il.wait_round(1, {"Promoted", "Rejected", "Failed"})
    assert done["state"] == "Promoted" and done["deploy"]["service_role"] == "serve-2"
    status = il.show()["status"]
    assert status["service"]["job_name"] == "loop-serve-2"
    assert status["service"]["phase"] == "Running"
    il.service_log_with("m-v2 accuracy=0.9")
    assert [r[0] for r in il.runs()].count("serve") == 2


def test_a_failing_train_job_fails_its_round_until_max_failed_rounds_stops_the_loop(
        il: il_live.IL) -> None:
    il.create(il.spec(serve=False, maxFailedRounds=2))
    il.append(["fail", "0.9", "fail", "0.9"])
    failed = il.wait_state("Failed")["status"]
    assert [r["state"] for r in failed["rounds"]] == ["Failed", "Failed"]
    assert "ended Failed" in failed["rounds"][0]["message"]
    assert failed["rounds"][1]["train_samples"] == 2  # the same samples, tried again
    assert failed["message"].startswith("2 round(s) failed in a row; the last: its train job")
    assert [r[:2] for r in il.runs()] == [("train", 1), ("train", 2)]
    il.act("stop", status=409)
    il.act("resume")
    il.wait_round(3, {"Failed"})
