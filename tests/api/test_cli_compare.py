"""`corral compare` against a real server: two runs of the example MLP with different
parameters, side by side, and a job that does not exist."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest
import yaml

from tests import factories
from tests.api import test_versions_api
from tests.api.test_cli import assert_one_error_line, corral, submit, write_job

pytestmark = pytest.mark.slow


def _run(live: Any, folder: pathlib.Path, name: str, lr: str) -> str:
    job_file = write_job(folder, name, epochs=2)
    body = yaml.safe_load(job_file.read_text())
    body["algorithm"]["parameters"] += [{"name": "lr", "value": lr},
                                        {"name": "hidden", "value": "16"}]
    job_file.write_text(yaml.safe_dump(body))
    job_id = submit(live, job_file)
    assert live.wait(job_id, timeout=120)["status"]["phase"] == "Completed"
    # Its last metrics are read once it has ended: wait until the server is done with it.
    factories.wait_for(lambda: test_versions_api.finalized(live, job_id), timeout=60,
                       what=f"job {job_id} to be finished")
    return job_id


def test_compare_shows_two_runs_side_by_side(live_server: Any, tmp_path: pathlib.Path) -> None:
    slow = _run(live_server, tmp_path, "cmp-slow", "0.001")
    fast = _run(live_server, tmp_path, "cmp-fast", "0.05")

    text = corral(live_server, "compare", "cmp-slow", fast)  # a name and an id
    data = corral(live_server, "compare", slow, "cmp-fast", "--json")

    assert text.exit_code == 0, text.output
    lines = text.stdout.splitlines()
    [lr] = [line for line in lines if "--lr" in line]
    assert lr.split() == ["*", "--lr", "0.001", "0.05"]
    [hidden] = [line for line in lines if "--hidden" in line]
    assert hidden.split() == ["--hidden", "16", "16"]  # the same: not marked
    assert any(line.split()[:2] == ["phase", "Completed"] for line in lines)
    assert any("final val_accuracy" in line for line in lines)
    assert any("loss best (min)" in line for line in lines)
    assert any("accuracy best (max)" in line for line in lines)

    assert data.exit_code == 0, data.output
    found = json.loads(data.stdout)
    assert [j["id"] for j in found["jobs"]] == [slow, fast]
    by = {(r["section"], r["name"]): r for r in found["rows"]}
    assert by["parameters", "lr"] == {"section": "parameters", "name": "lr",
                                      "values": ["0.001", "0.05"], "differs": True}
    assert by["parameters", "hidden"]["differs"] is False
    for job in found["jobs"]:
        loss = job["metrics"]["loss"]
        assert loss["direction"] == "min" and loss["points"] >= 2
        assert loss["best"] <= loss["last"]
        assert set(job["final_metrics"]) >= {"val_accuracy", "val_loss"}
    assert by["final_metrics", "val_loss"]["values"] == [
        j["final_metrics"]["val_loss"] for j in found["jobs"]]
    assert by["curve_last", "loss"]["values"] == [
        j["metrics"]["loss"]["last"] for j in found["jobs"]]


def test_compare_names_a_job_that_does_not_exist(live_server: Any,
                                                  tmp_path: pathlib.Path) -> None:
    job_id = submit(live_server, write_job(tmp_path, "cmp-one", epochs=1))

    result = corral(live_server, "compare", job_id, "no-such-job")

    assert_one_error_line(result, "ModelArts.2775: ")
    assert "no-such-job" in result.stderr
    assert corral(live_server, "compare", job_id).exit_code == 2  # one job: a usage error
