"""Training metrics jobs report, and versions of a job, over HTTP and the CLI.

Real jobs on an embedded server (`live_server`); each test waits for what a user would wait
for (a phase, the metrics, a registered model) with generous timeouts.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from corral import settings as settings_mod
from corral.cli import main, state
from tests import conftest, factories

EXAMPLE = pathlib.Path(__file__).parents[2] / "examples" / "mlp"
WAIT = 90.0


@pytest.fixture
def live(live_server: conftest.Live) -> Iterator[conftest.Live]:
    yield live_server
    stop_active(live_server)


def stop_active(live: conftest.Live) -> None:
    """Terminate what a test left running (the server's stop leaves jobs running)."""
    r = live.http.post(live.path("/training-job-searches"), json={
        "limit": 50, "filters": [{"key": "phase", "operator": "in",
                                  "value": ["Creating", "Pending", "Running"]}]})
    for job in r.json().get("items", []):
        live.http.post(live.path(f"/training-jobs/{job['metadata']['id']}/actions"),
                       json={"action_type": "terminate"})


def run_cli(live: conftest.Live, *args: str) -> Any:
    from click import testing

    settings = settings_mod.Settings(home=live.settings.home)  # where the login is
    result = testing.CliRunner().invoke(main.cli, ["--url", live.url, *args],
                                        obj=state.State(settings))
    assert result.exit_code == 0, result.output
    return result


def get(live: conftest.Live, path: str, status: int = 200) -> Any:
    r = live.http.get(live.path(path))
    assert r.status_code == status, r.text
    return r.json()


def post(live: conftest.Live, path: str, body: dict[str, Any], status: int = 201) -> Any:
    r = live.http.post(live.path(path), json=body)
    assert r.status_code == status, r.text
    return r.json()


def finished(live: conftest.Live, job_id: str, version: str = "V0001") -> dict[str, Any]:
    """The version once the job ended and the server finished with it (final metrics)."""
    live.wait(job_id, timeout=WAIT)
    factories.wait_for(lambda: finalized(live, job_id), timeout=WAIT,
                       what=f"job {job_id} to be finished")
    return dict(get(live, f"/training-jobs/{job_id}/versions/{version}"))


def finalized(live: conftest.Live, job_id: str) -> bool:
    """The storage component is done with the ended job (metrics, uploads, model)."""
    from corral.store import job_repo

    with live.embedded.platform.store.read() as conn:
        row = job_repo.job_by_id(conn, job_id)
    return row is not None and row.finalized_at is not None


# --- metrics the job reports -------------------------------------------------------------

REPORTER = """
import json, os
from corral import job
print("corral:metrics step=1 loss=0.9 accuracy=0.5", flush=True)
job.log_metrics({"loss": 0.5, "accuracy": 0.75}, step=2)
with open(os.environ["CORRAL_METRICS_FILE"], "a") as fh:
    fh.write(json.dumps({"step": 3, "loss": 0.25}) + "\\n")
print("corral:metrics not a metric at all", flush=True)
"""


def test_metrics_reported_three_ways_are_served_with_their_final_values(
        live: conftest.Live, tmp_path: pathlib.Path) -> None:
    code = factories.write_code(tmp_path, REPORTER)
    job_id = live.submit(factories.make_job(code_dir=code))["metadata"]["id"]

    assert live.wait(job_id, timeout=WAIT)["status"]["phase"] == "Completed"
    found = factories.wait_for(
        lambda: (m := get(live, f"/training-jobs/{job_id}/training-metrics"))["final_metrics"]
        .get("loss") == 0.25 and m, timeout=WAIT, what="the reported metrics")

    series = {s["metric"]: s for s in found["metrics"]}
    loss = series["loss"]
    assert sorted(zip(loss["steps"], loss["value"], strict=True)) == [
        (1, 0.9), (2, 0.5), (3, 0.25)]
    assert sorted(series["accuracy"]["steps"]) == [1, 2]
    assert found["final_metrics"]["accuracy"] in (0.5, 0.75)
    assert set(series) == {"loss", "accuracy"}

    # The per-task metrics call (the SDK's) shows them beside the resource series.
    per_task = get(live, f"/training-jobs/{job_id}/metrics/worker-0")
    names = [m["metric"] for m in per_task["metrics"]]
    assert names[:4] == ["cpuUsage", "memUsage", "gpuUtil", "gpuMemUsage"]
    assert {"loss", "accuracy"} <= set(names)

    v1 = finished(live, job_id)
    assert v1["final_metrics"] == found["final_metrics"]


def test_metrics_of_a_running_job_arrive_while_it_runs(live: conftest.Live,
                                                       tmp_path: pathlib.Path) -> None:
    gate = tmp_path / "go"
    code = factories.write_code(tmp_path, (
        "import pathlib, time\n"
        "from corral import job\n"
        "job.log_metrics({'loss': 1.0}, step=1)\n"
        f"while not pathlib.Path({str(gate)!r}).exists(): time.sleep(0.05)\n"
        "job.log_metrics({'loss': 0.5}, step=2)\n"))
    job_id = live.submit(factories.make_job(code_dir=code))["metadata"]["id"]

    factories.wait_for(lambda: get(live, f"/training-jobs/{job_id}/training-metrics")
                       ["final_metrics"].get("loss") == 1.0, timeout=WAIT,
                       what="the first point")
    assert live.job(job_id)["status"]["phase"] == "Running"
    gate.touch()
    factories.wait_for(lambda: get(live, f"/training-jobs/{job_id}/training-metrics")
                       ["final_metrics"].get("loss") == 0.5, timeout=WAIT, what="the last")


def test_training_metrics_of_an_unknown_task_or_job_are_404(live: conftest.Live) -> None:
    job_id = live.submit(factories.make_job(command="true"))["metadata"]["id"]
    r = live.http.get(live.path(f"/training-jobs/{job_id}/training-metrics?task=worker-9"))
    assert r.status_code == 404 and r.json()["error_code"] == "ModelArts.2775"
    r = live.http.get(live.path("/training-jobs/nope/training-metrics"))
    assert r.status_code == 404


# --- versions ---------------------------------------------------------------------------


def git_code(root: pathlib.Path) -> tuple[pathlib.Path, str]:
    """The MLP example in a fresh git work tree; returns (code dir, HEAD commit)."""
    code = root / "repo"
    code.mkdir()
    (code / "train.py").write_text((EXAMPLE / "train.py").read_text())
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin", "HOME": str(root)}
    for args in (["init", "-q"], ["add", "train.py"], ["commit", "-q", "-m", "mlp"]):
        subprocess.run(["git", "-C", str(code), *args], check=True, env=env)
    head = subprocess.run(["git", "-C", str(code), "rev-parse", "HEAD"], check=True,
                          capture_output=True, text=True).stdout.strip()
    return code, head


def mlp_job(code: pathlib.Path, out: pathlib.Path, epochs: int, **kw: Any) -> dict[str, Any]:
    return factories.make_job(name=kw.pop("name", None), code_dir=code,
                              parameters={"epochs": str(epochs), "points": "400",
                                          "hidden": "16", **kw.pop("parameters", {})},
                              outputs={"train_url": str(out)}, **kw)


def test_a_version_runs_with_changes_in_its_own_folder_and_records_its_code(
        live: conftest.Live, tmp_path: pathlib.Path) -> None:
    code, head = git_code(tmp_path)
    out = tmp_path / "out"
    first = live.submit(mlp_job(code, out, 6, name="mlp-versions"))["metadata"]["id"]
    v1 = finished(live, first)

    second = post(live, f"/training-jobs/{first}/versions", {
        "algorithm": {"parameters": [{"name": "epochs", "value": "8"}]},
        "description": "longer"})
    second_id = second["metadata"]["id"]
    assert second["metadata"]["name"] == "mlp-versions"
    assert second["metadata"]["version"] == "V0002"
    assert second["metadata"]["family_id"] == first
    v2 = finished(live, second_id, "V0002")

    assert (out / "model.npz").is_file() and (out / "V0002" / "model.npz").is_file()
    assert v1["outputs"] == {"train_url": str(out)}
    assert v2["outputs"] == {"train_url": str(out / "V0002")}
    assert (v1["parameters"]["epochs"], v2["parameters"]["epochs"]) == ("6", "8")
    assert v2["pre_version_name"] == "V0001" and v2["pre_version_id"] == first
    assert v1["code_hash"].startswith("sha256:") and v1["code_hash"] == v2["code_hash"]
    assert v1["git_commit"] == head
    assert set(v2["final_metrics"]) >= {"loss", "accuracy", "val_accuracy"}

    listed = get(live, f"/training-jobs/{second_id}/versions")
    assert listed["job_id"] == first and listed["version_count"] == 2
    assert [v["version_name"] for v in listed["versions"]] == ["V0001", "V0002"]
    assert [v["phase"] for v in listed["versions"]] == ["Completed", "Completed"]

    table = run_cli(live, "versions", first).output
    assert "V0001" in table and "V0002" in table and "accuracy=" in table
    diff = run_cli(live, "diff", first, "V0001", "V0002").output
    assert "--epochs" in diff and "6" in diff and "8" in diff
    assert "code hash" not in diff  # the same code: no difference to show
    as_json = json.loads(run_cli(live, "diff", first, "1", "2", "--json").output)
    assert as_json["changed"]["--epochs"] == {"left": "6", "right": "8"}


def test_a_changed_code_dir_shows_as_a_new_code_hash(live: conftest.Live,
                                                     tmp_path: pathlib.Path) -> None:
    one = factories.write_code(tmp_path, "print('one')")
    two = factories.write_code(tmp_path, "print('two')")
    first = live.submit(factories.make_job(code_dir=one))["metadata"]["id"]
    second = post(live, f"/training-jobs/{first}/versions",
                  {"algorithm": {"code_dir": str(two)}})["metadata"]["id"]
    a, b = finished(live, first), finished(live, second, "V0002")
    assert a["code_hash"] != b["code_hash"] and a["git_commit"] is None
    assert (b["code_dir"], b["boot_file"]) == (str(two), "train.py")
    diff = run_cli(live, "diff", first, "V0001", "V0002").output
    assert "code hash" in diff and "code dir" in diff


def test_resume_continues_from_the_earlier_versions_checkpoint(
        live: conftest.Live, tmp_path: pathlib.Path) -> None:
    out = tmp_path / "out"
    first = live.submit(mlp_job(EXAMPLE, out, 4))["metadata"]["id"]
    live.wait(first, timeout=WAIT)
    second = post(live, f"/training-jobs/{first}/versions", {
        "resume": True, "algorithm": {"parameters": [{"name": "epochs", "value": "7"}]}})
    second_id = second["metadata"]["id"]
    assert live.wait(second_id, timeout=WAIT)["status"]["phase"] == "Completed"

    log = get(live, f"/training-jobs/{second_id}/tasks/worker-0/logs/preview")["content"]
    assert "resuming after epoch 4" in log
    with np.load(out / "V0002" / "checkpoint.npz") as ck:
        assert int(ck["epoch"]) == 7
    with np.load(out / "checkpoint.npz") as ck:  # the earlier version's stays as it was
        assert int(ck["epoch"]) == 4
    assert not (out / "V0002" / "V0002").exists()  # its own folder was not copied into it
    finished(live, second_id, "V0002")
    steps = get(live, f"/training-jobs/{second_id}/training-metrics")["metrics"][0]["steps"]
    assert min(s for s in steps if s is not None) >= 5


def test_versions_from_any_earlier_one_and_numbers_are_never_reused(
        live: conftest.Live, tmp_path: pathlib.Path) -> None:
    first = live.submit(factories.make_job(command="true", parameters={"a": "1"}))
    first_id = first["metadata"]["id"]
    v2 = post(live, f"/training-jobs/{first_id}/versions",
              {"algorithm": {"parameters": [{"name": "a", "value": "2"}]}})
    v3 = post(live, f"/training-jobs/{v2['metadata']['id']}/versions",
              {"from_version": "V0001", "algorithm": {"parameters": [{"name": "b", "value": "3"}]}})
    assert v3["metadata"]["version"] == "V0003"
    params = {p["name"]: p["value"] for p in v3["algorithm"]["parameters"]}
    assert params == {"a": "1", "b": "3"}
    for job in (first, v2, v3):
        live.wait(job["metadata"]["id"], timeout=WAIT)

    r = live.http.delete(live.path(f"/training-jobs/{v3['metadata']['id']}"))
    assert r.status_code == 202
    v4 = post(live, f"/training-jobs/{first_id}/versions", {})
    assert v4["metadata"]["version"] == "V0004"
    names = [v["version_name"] for v in get(live, f"/training-jobs/{first_id}/versions")
             ["versions"]]
    assert names == ["V0001", "V0002", "V0004"]
    # The family's name stays taken while any version lives.
    r = live.http.post(live.path("/training-jobs"),
                       json=factories.make_job(name=first["metadata"]["name"], command="true"))
    assert r.status_code == 400 and r.json()["error_code"] == "ModelArts.2751"


def test_bad_version_requests_are_refused_and_change_nothing(live: conftest.Live,
                                                             tmp_path: pathlib.Path) -> None:
    first = live.submit(factories.make_job(command="sleep 120"))["metadata"]["id"]
    cases = [
        ({"from_version": "V0009"}, 404, "ModelArts.2775"),
        ({"from_version": "banana"}, 400, "ModelArts.2788"),
        ({"spec": {"resource": {"flavor_id": "nope"}}}, 400, "ModelArts.2763"),
        ({"resume": True}, 409, "ModelArts.2796"),  # V0001 still runs
        ({"algorithm": {"parameters": [{"name": "bad name", "value": 1}]}}, 400,
         "ModelArts.2788"),
        ({"remove_parameters": ["missing"]}, 400, "ModelArts.2788"),
    ]
    for body, status, code in cases:
        r = live.http.post(live.path(f"/training-jobs/{first}/versions"), json=body)
        assert (r.status_code, r.json().get("error_code")) == (status, code), (body, r.text)
    r = live.http.post(live.path("/training-jobs/nope/versions"), json={})
    assert r.status_code == 404
    listed = get(live, f"/training-jobs/{first}/versions")
    assert listed["version_count"] == 1
    # Nothing was used up by the refusals: the next version is V0002.
    assert post(live, f"/training-jobs/{first}/versions", {})["metadata"]["version"] == "V0002"


def test_new_version_from_the_cli(live: conftest.Live, tmp_path: pathlib.Path) -> None:
    first = live.submit(factories.make_job(command="true", parameters={"lr": "1"}))
    out = run_cli(live, "new-version", first["metadata"]["id"], "-p", "lr=0.5", "--json")
    job = json.loads(out.output)
    assert job["metadata"]["version"] == "V0002"
    assert {p["name"]: p["value"] for p in job["algorithm"]["parameters"]} == {"lr": "0.5"}
    assert sys.executable  # the job runs with this interpreter's server
