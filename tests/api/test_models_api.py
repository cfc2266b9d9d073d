"""The model registry over HTTP and the CLI: registration when a job ends, versions,
aliases, archives, deletion, and inference and evaluation jobs that use a model."""

from __future__ import annotations

import io
import json
import pathlib
import tarfile
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from tests import conftest, factories
from tests.api import test_versions_api as helpers

EXAMPLE = helpers.EXAMPLE
WAIT = helpers.WAIT
get, post, run_cli, finalized = helpers.get, helpers.post, helpers.run_cli, helpers.finalized


@pytest.fixture
def live(live_server: conftest.Live) -> Iterator[conftest.Live]:
    yield live_server
    helpers.stop_active(live_server)


def train(live: conftest.Live, out: pathlib.Path, name: str, epochs: int = 5,
          **kw: Any) -> str:
    job_id = live.submit(helpers.mlp_job(EXAMPLE, out, epochs, name=name, **kw))["metadata"]["id"]
    helpers.finished(live, job_id)
    return str(job_id)


def model(live: conftest.Live, name: str, status: int = 200) -> Any:
    return get(live, f"/models/{name}", status)


def test_a_completed_job_registers_its_model_with_where_it_came_from(
        live: conftest.Live, tmp_path: pathlib.Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    job_id = train(live, tmp_path / "out", "spirals", inputs={"data_url": str(data)})
    assert live.job(job_id)["status"]["phase"] == "Completed"

    found = model(live, "spirals")
    assert found["latest_version"] == 1 and found["version_count"] == 1
    [v] = found["versions"]
    assert v["source_job_id"] == job_id and v["source_version"] == "V0001"
    assert v["source_channel"] == "train_url" and v["source_phase"] == "Completed"
    assert v["parameters"]["epochs"] == "5" and v["inputs"] == {"data_url": str(data)}
    assert v["code_hash"].startswith("sha256:")
    assert set(v["metrics"]) >= {"loss", "accuracy", "val_accuracy"}
    assert v["metrics"] == helpers.get(live, f"/training-jobs/{job_id}/training-metrics")[
        "final_metrics"]
    # The registry keeps a copy: the job's own output may change or go.
    stored = pathlib.Path(v["location"])
    assert stored.is_relative_to(live.settings.home / "models")
    assert (stored / "model.npz").is_file() and v["file_count"] >= 2
    events = get(live, f"/training-jobs/{job_id}/events?pattern=Model registered")
    assert events["total"] == 1

    # A later version of the job is a later version of the same model.
    second = post(live, f"/training-jobs/{job_id}/versions", {})["metadata"]["id"]
    helpers.finished(live, second, "V0002")
    two = get(live, "/models/spirals/versions/2")
    assert two["source_version"] == "V0002" and two["source_job_id"] == second
    assert get(live, "/models/spirals/versions/latest")["version"] == 2
    assert [m["name"] for m in get(live, "/models")["models"]] == ["spirals"]


def test_failed_or_stopped_jobs_register_nothing_unless_asked(
        live: conftest.Live, tmp_path: pathlib.Path) -> None:
    code = factories.write_code(tmp_path, (
        "import pathlib, sys\n"
        "out = pathlib.Path(sys.argv[-1].split('=', 1)[1])\n"
        "(out / 'half.bin').write_bytes(b'x' * 10)\n"
        "sys.exit(3)\n"))
    plain = live.submit(factories.make_job(name="broken", code_dir=code,
                                           outputs={"train_url": str(tmp_path / "a")}))
    asked = factories.make_job(name="broken-kept", code_dir=code,
                               outputs={"train_url": str(tmp_path / "b")})
    asked["metadata"]["annotations"] = {"corral/register-model": "always",
                                        "corral/model-name": "salvage"}
    asked_id = live.submit(asked)["metadata"]["id"]
    for job_id in (plain["metadata"]["id"], asked_id):
        assert live.wait(job_id, timeout=WAIT)["status"]["phase"] == "Failed"
        factories.wait_for(lambda j=job_id: finalized(live, j), timeout=WAIT)

    assert model(live, "broken", 404)["error_code"] == "ModelArts.2775"
    salvaged = model(live, "salvage")["versions"][0]
    assert salvaged["source_phase"] == "Failed" and salvaged["file_count"] == 1

    # An ended job's outputs can also be registered on request afterwards.
    r = live.http.post(live.path("/models/broken/versions"),
                       json={"job_id": plain["metadata"]["id"]})
    assert r.status_code == 201, r.text
    assert r.json()["version"] == 1 and r.json()["source_phase"] == "Failed"


def test_a_job_is_registered_once_and_a_second_model_is_refused_with_nothing_made(
        live: conftest.Live, tmp_path: pathlib.Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "weights.bin").write_bytes(b"w")
    job_id = live.submit(factories.make_job(name="once", command="true", outputs={
        "train_url": str(out)}))["metadata"]["id"]
    helpers.finished(live, job_id)
    assert model(live, "once")["latest_version"] == 1  # registered when it completed
    again = post(live, "/models/once/versions", {"job_id": job_id})
    assert again["version"] == 1  # the same version: no second one
    refused = post(live, "/models/other/versions", {"job_id": job_id}, 400)
    assert refused == {"error_code": "ModelArts.2751", "error_msg": (
        f"training job '{job_id}' is already registered as once version 1")}
    model(live, "other", 404)
    assert not (live.settings.home / "models" / live.project_id / "other").exists()


def test_aliases_move_versions_go_and_numbers_stay_taken(
        live: conftest.Live, tmp_path: pathlib.Path) -> None:
    first = train(live, tmp_path / "out", "aliased", epochs=3)
    second = post(live, f"/training-jobs/{first}/versions", {})["metadata"]["id"]
    helpers.finished(live, second, "V0002")
    factories.wait_for(lambda: model(live, "aliased")["version_count"] == 2, timeout=WAIT)

    r = live.http.put(live.path("/models/aliased/aliases/production"), json={"version": 1})
    assert r.status_code == 200 and r.json()["aliases"] == {"production": 1}
    assert get(live, "/models/aliased/versions/production")["version"] == 1
    live.http.put(live.path("/models/aliased/aliases/candidate"), json={"version": 2})
    moved = live.http.put(live.path("/models/aliased/aliases/production"), json={"version": 2})
    assert moved.json()["aliases"] == {"candidate": 2, "production": 2}
    assert get(live, "/models/aliased/versions/2")["aliases"] == ["candidate", "production"]

    bad = [
        (live.http.put(live.path("/models/aliased/aliases/latest"), json={"version": 1}),
         400, "ModelArts.2788"),
        (live.http.put(live.path("/models/aliased/aliases/x"), json={"version": 9}),
         404, "ModelArts.2775"),
        (live.http.put(live.path("/models/nope/aliases/x"), json={"version": 1}),
         404, "ModelArts.2775"),
        (live.http.get(live.path("/models/aliased/versions/staging")), 404, "ModelArts.2775"),
        (live.http.put(live.path("/models/aliased/aliases/x"), json={"version": "two"}),
         400, "ModelArts.2788"),
    ]
    for r, status, code in bad:
        assert (r.status_code, r.json()["error_code"]) == (status, code), r.text
    assert model(live, "aliased")["aliases"] == {"candidate": 2, "production": 2}

    location = pathlib.Path(get(live, "/models/aliased/versions/2")["location"])
    assert live.http.delete(live.path("/models/aliased/versions/2")).status_code == 200
    # Every move by hand is in the alias's history, with who made it.
    moves = get(live, "/models/aliased/aliases/production/history")["history"]
    assert [(m["from_version"], m["to_version"], m["user_name"], m["reason"])
            for m in moves] == [(None, 1, "admin", "set by hand"),
                                (1, 2, "admin", "set by hand"),
                                (2, None, "admin", "version 2 deleted")]
    assert not location.exists()
    after = model(live, "aliased")
    assert [v["version"] for v in after["versions"]] == [1] and after["aliases"] == {}
    third = post(live, f"/training-jobs/{first}/versions", {})["metadata"]["id"]
    helpers.finished(live, third, "V0003")
    assert [v["version"] for v in model(live, "aliased")["versions"]] == [1, 3]

    r = live.http.delete(live.path("/models/aliased/aliases/production"))
    assert r.status_code == 404
    assert live.http.delete(live.path("/models/aliased")).status_code == 200
    assert model(live, "aliased", 404)


def test_a_model_version_downloads_as_one_archive(live: conftest.Live,
                                                  tmp_path: pathlib.Path) -> None:
    train(live, tmp_path / "out", "packed", epochs=3)
    r = live.http.get(live.path("/models/packed/versions/1/archive"))
    assert r.status_code == 200 and r.headers["content-type"] == "application/gzip"
    with tarfile.open(fileobj=io.BytesIO(r.content), mode="r:gz") as tar:
        names = tar.getnames()
        assert "packed-v1/model.npz" in names
        with np.load(io.BytesIO(tar.extractfile("packed-v1/model.npz").read())) as m:  # type: ignore[union-attr]
            assert set(m.files) == {"w1", "b1", "w2", "b2"}
    assert live.http.get(live.path("/models/packed/versions/7/archive")).status_code == 404

    out = tmp_path / "dl.tar.gz"
    run_cli(live, "models", "download", "packed", "1", "-o", str(out))
    with tarfile.open(out) as tar:
        assert "packed-v1/model.npz" in tar.getnames()


def test_a_copy_a_killed_server_left_half_made_is_not_part_of_the_model(
        live: conftest.Live, tmp_path: pathlib.Path) -> None:
    """Registering copies the output into the registry under the job's id; a server killed
    in the middle of a file leaves what it was writing there (`.<name>.tmp-<pid>`), and
    the next registration of that job must not take it into the model."""
    out = tmp_path / "out"
    script = ("import pathlib, sys, time; out = pathlib.Path(sys.argv[1].split('=', 1)[1]); "
              "out.mkdir(parents=True, exist_ok=True); "
              "(out / 'weights.bin').write_bytes(b'w' * 100); time.sleep(2)")
    job_id = live.submit(factories.make_job(
        name="half-made", command=f'python3 -c "{script}"',
        outputs={"train_url": str(out)}))["metadata"]["id"]
    folder = live.settings.home / "models" / live.project_id / "half-made" / job_id
    folder.mkdir(parents=True)
    (folder / ".weights.bin.tmp-4194305").write_bytes(b"w" * 40)  # the killed server's
    helpers.finished(live, job_id)
    v = get(live, "/models/half-made/versions/1")
    assert (v["file_count"], v["size_bytes"]) == (1, 100)
    assert sorted(p.name for p in folder.iterdir()) == ["weights.bin"]
    r = live.http.get(live.path("/models/half-made/versions/1/archive"))
    with tarfile.open(fileobj=io.BytesIO(r.content), mode="r:gz") as tar:
        assert tar.getnames() == ["half-made-v1/weights.bin"]


def test_inference_and_evaluation_jobs_run_a_registered_model(
        live: conftest.Live, tmp_path: pathlib.Path) -> None:
    train(live, tmp_path / "out", "spiral-model", epochs=20)
    live.http.put(live.path("/models/spiral-model/aliases/production"), json={"version": 1})

    infer = factories.make_job(name="predict", code_dir=EXAMPLE, boot_file="predict.py",
                               outputs={"result_url": str(tmp_path / "pred")})
    infer.update(kind="inference", model={"name": "spiral-model", "alias": "production"})
    job = live.submit(infer)
    assert job["kind"] == "inference"
    assert job["model"]["version"] == 1 and job["model"]["alias"] == "production"
    params = {p["name"]: p["value"] for p in job["algorithm"]["parameters"]}
    location = get(live, "/models/spiral-model/versions/1")["location"]
    assert params["model_url"] == location
    assert live.wait(job["metadata"]["id"], timeout=WAIT)["status"]["phase"] == "Completed"
    predictions = np.load(tmp_path / "pred" / "predictions.npy")
    assert predictions.shape == (1000,)
    factories.wait_for(lambda: finalized(live, job["metadata"]["id"]), timeout=WAIT)
    assert model(live, "predict", 404)  # inference registers no model

    evaluate = dict(infer, kind="evaluation", model={"name": "spiral-model"})
    evaluate["metadata"] = {"name": "evaluate"}
    ev = live.submit(evaluate)["metadata"]["id"]
    helpers.finished(live, ev)
    accuracy = get(live, f"/training-jobs/{ev}/training-metrics")["final_metrics"]["accuracy"]
    assert accuracy > 0.5  # better than chance: the trained weights were used
    summary = json.loads((tmp_path / "pred" / "summary.json").read_text())
    assert summary["accuracy"] == pytest.approx(accuracy)

    for bad, says in (({"name": "nope"}, "model 'nope' does not exist"),
                      ({"name": "spiral-model", "alias": "gone"}, "no alias 'gone'"),
                      ({"name": "spiral-model", "version": 5}, "no version 5")):
        body = dict(infer, model=bad)
        body["metadata"] = {"name": "bad-ref"}
        r = live.http.post(live.path("/training-jobs"), json=body)
        assert r.status_code == 400 and says in r.json()["error_msg"], r.text
    no_model = dict(infer)
    no_model.pop("model")
    r = live.http.post(live.path("/training-jobs"), json=no_model)
    assert r.status_code == 400 and "needs `model`" in r.json()["error_msg"]


def test_the_models_cli(live: conftest.Live, tmp_path: pathlib.Path) -> None:
    train(live, tmp_path / "out", "cli-model", epochs=3)
    listed = run_cli(live, "models", "list").output
    assert "cli-model" in listed
    run_cli(live, "models", "alias", "cli-model", "production", "1")
    shown = run_cli(live, "models", "show", "cli-model").output
    assert "production" in shown and "V0001" in shown
    one = json.loads(run_cli(live, "models", "show", "cli-model", "production", "--json").output)
    assert one["version"] == 1 and one["aliases"] == ["production"]
    assert "accuracy" in run_cli(live, "models", "show", "cli-model", "1").output
    run_cli(live, "models", "delete", "cli-model", "1")
    assert json.loads(run_cli(live, "models", "list", "--json").output)["models"][0][
        "version_count"] == 0
