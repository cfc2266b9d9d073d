"""Jobs, versions and models on an S3-compatible object store (a real S3 API server on
loopback, see tests/s3.py): inputs fetched before the start, outputs uploaded while the job
runs and at its end, the model registered into and downloaded from the store, and what a
user sees when the store fails in the middle of a run."""

from __future__ import annotations

import io
import pathlib
import tarfile
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from tests import conftest, factories, s3
from tests.api import test_versions_api as helpers

pytestmark = pytest.mark.slow
EXAMPLE = helpers.EXAMPLE
WAIT = 90.0


@pytest.fixture
def store() -> Iterator[s3.S3]:
    server = s3.start()
    yield server
    server.stop()


@pytest.fixture
def live_s3(tmp_path: pathlib.Path, store: s3.S3) -> Iterator[tuple[conftest.Live, s3.S3, str]]:
    bucket = store.bucket()
    live = conftest.start_live(tmp_path / "home", s3=store.config,
                               model_store=f"s3://{bucket}/registry",
                               upload_retry_delay=0.1, storage_interval=0.2)
    yield live, store, bucket
    helpers.stop_active(live)
    conftest.stop_live(live)


def events(live: conftest.Live, job_id: str) -> list[dict[str, Any]]:
    return list(helpers.get(live, f"/training-jobs/{job_id}/events?limit=100")["events"])


def spirals_npz() -> bytes:
    rng = np.random.default_rng(3)
    x = rng.normal(0, 1, (200, 2))
    y = (x[:, 0] * x[:, 1] > 0).astype(np.int64)
    buf = io.BytesIO()
    np.savez(buf, x=x, y=y)
    return buf.getvalue()


def test_a_job_reads_s3_writes_its_model_there_and_the_model_comes_back(
        live_s3: tuple[conftest.Live, s3.S3, str], tmp_path: pathlib.Path) -> None:
    live, store, bucket = live_s3
    for name in ("train.py", "predict.py"):
        store.put(bucket, f"code/{name}", (EXAMPLE / name).read_bytes())
    store.put(bucket, "data/data.npz", spirals_npz())
    body = factories.make_job(
        name="s3-mlp", code_dir=f"s3://{bucket}/code/", boot_file=f"s3://{bucket}/code/train.py",
        parameters={"epochs": "5", "hidden": "16"},
        inputs={"data_url": f"obs://{bucket}/data/"}, outputs={"train_url": f"s3://{bucket}/out/"})
    body["spec"]["log_export_path"] = {"obs_url": f"s3://{bucket}/logs/"}
    job = live.submit(body)
    job_id = job["metadata"]["id"]
    params = {c["name"]: c["local_dir"] for c in job["algorithm"]["inputs"]}
    assert params["data_url"].startswith(str(live.settings.runs_dir))  # fetched locally

    assert live.wait(job_id, timeout=WAIT)["status"]["phase"] == "Completed"
    log = helpers.get(live, f"/training-jobs/{job_id}/tasks/worker-0/logs/preview")["content"]
    assert f"data: {params['data_url']}/data.npz" in log  # it trained on the S3 data
    factories.wait_for(lambda: helpers.finalized(live, job_id), timeout=WAIT)

    assert {"out/model.npz", "out/metrics.json", "out/checkpoint.npz"} <= set(
        store.keys(bucket, "out/"))
    assert store.keys(bucket, "logs/") == ["logs/attempt-1/worker-0.log"]
    said = [e["message"] for e in events(live, job_id)]
    assert any(m.startswith("Inputs fetched: 3 file(s)") for m in said), said
    assert any(m.startswith("Output 'train_url' uploaded") for m in said), said

    version = helpers.get(live, "/models/s3-mlp/versions/1")
    assert version["location"] == f"s3://{bucket}/registry/{live.project_id}/s3-mlp/{job_id}"
    assert f"registry/{live.project_id}/s3-mlp/{job_id}/model.npz" in store.keys(bucket,
                                                                                "registry/")
    assert version["inputs"] == {"data_url": f"obs://{bucket}/data/"}
    r = live.http.get(live.path("/models/s3-mlp/versions/1/archive"))
    assert r.status_code == 200
    with tarfile.open(fileobj=io.BytesIO(r.content), mode="r:gz") as tar:
        member = tar.extractfile("s3-mlp-v1/model.npz")
        assert member is not None
        assert member.read() == store.get(bucket, "out/model.npz")

    # An inference job gets the model fetched from the store before it starts.
    infer = factories.make_job(name="s3-predict", code_dir=f"s3://{bucket}/code/",
                               boot_file="predict.py",
                               outputs={"result_url": str(tmp_path / "pred")})
    infer.update(kind="inference", model={"name": "s3-mlp", "version": 1})
    pred = live.submit(infer)["metadata"]["id"]
    assert live.wait(pred, timeout=WAIT)["status"]["phase"] == "Completed"
    assert np.load(tmp_path / "pred" / "predictions.npy").shape == (1000,)


def test_an_upload_that_fails_mid_run_is_retried_said_and_the_files_kept(
        live_s3: tuple[conftest.Live, s3.S3, str], tmp_path: pathlib.Path) -> None:
    live, store, bucket = live_s3
    gate = tmp_path / "gate"
    code = factories.write_code(tmp_path, (
        "import pathlib, sys, time\n"
        "out = pathlib.Path(sys.argv[-1].split('=', 1)[1])\n"
        "(out / 'early.txt').write_text('early')\n"
        f"while not pathlib.Path({str(gate)!r}).exists(): time.sleep(0.05)\n"
        "(out / 'late.txt').write_text('late')\n"))
    body = factories.make_job(code_dir=code)
    body["algorithm"]["outputs"] = [{"name": "train_url", "period": "1s",
                                     "remote": {"obs": {"obs_url": f"s3://{bucket}/run/"}}}]
    job = live.submit(body)
    job_id = job["metadata"]["id"]
    local = pathlib.Path(job["algorithm"]["outputs"][0]["local_dir"])

    # While it runs the output is uploaded every period.
    factories.wait_for(lambda: "run/early.txt" in store.keys(bucket, "run/"), timeout=WAIT,
                       what="the periodic upload")
    assert live.job(job_id)["status"]["phase"] == "Running"

    store.stop()  # the object store goes away in the middle of the run
    gate.touch()
    final = live.wait(job_id, timeout=WAIT)
    assert final["status"]["phase"] == "Completed"  # the job itself did its work
    factories.wait_for(lambda: helpers.finalized(live, job_id), timeout=WAIT)

    status = live.job(job_id)["status"]
    assert "output 'train_url' could not be uploaded" in status["reason"]
    assert f"after {live.settings.upload_retries} tries" in status["reason"]
    assert str(local) in status["reason"]
    failed = [e for e in events(live, job_id) if e["message"].startswith("Upload failed")]
    assert len(failed) == 1 and failed[0]["level"] == "Error"
    assert (local / "late.txt").read_text() == "late"  # the local copy is kept
    assert (local / "early.txt").read_text() == "early"


def test_an_input_missing_from_the_store_fails_the_job_before_it_starts(
        live_s3: tuple[conftest.Live, s3.S3, str]) -> None:
    live, _store, bucket = live_s3
    job = live.submit(factories.make_job(command="true",
                                         inputs={"data_url": f"s3://{bucket}/absent/"}))
    final = live.wait(job["metadata"]["id"], timeout=WAIT)
    assert (final["status"]["phase"], final["status"]["secondary_phase"]) == (
        "Failed", "CreateFailed")
    assert f"input 'data_url': s3://{bucket}/absent/ does not exist" in final["status"]["reason"]
    assert final["status"]["running_records"] == []  # no process ever started


def test_a_version_resumes_from_outputs_kept_in_the_store(
        live_s3: tuple[conftest.Live, s3.S3, str]) -> None:
    live, store, bucket = live_s3
    body = helpers.mlp_job(EXAMPLE, pathlib.Path("/unused"), 3, name="s3-resume")
    body["algorithm"]["outputs"] = [{"name": "train_url",
                                     "remote": {"obs": {"obs_url": f"s3://{bucket}/ck/"}}}]
    one = live.submit(body)["metadata"]["id"]
    helpers.finished(live, one)
    two = helpers.post(live, f"/training-jobs/{one}/versions", {
        "resume": True, "algorithm": {"parameters": [{"name": "epochs", "value": "5"}]}})
    two_id = two["metadata"]["id"]
    assert two["algorithm"]["outputs"][0]["remote"]["obs"]["obs_url"] == f"s3://{bucket}/ck/V0002"
    assert live.wait(two_id, timeout=WAIT)["status"]["phase"] == "Completed"
    helpers.finished(live, two_id, "V0002")
    log = helpers.get(live, f"/training-jobs/{two_id}/tasks/worker-0/logs/preview")["content"]
    assert "resuming after epoch 3" in log
    assert "ck/V0002/model.npz" in store.keys(bucket, "ck/V0002/")


def test_object_storage_urls_need_a_configured_store(live_server: conftest.Live) -> None:
    r = live_server.http.post(live_server.path("/training-jobs"), json=factories.make_job(
        command="true", outputs={"train_url": "s3://bucket/out/"}))
    assert r.status_code == 400
    assert "output 'train_url' 's3://bucket/out/': object storage is not configured" in \
        r.json()["error_msg"]
    found = live_server.http.post(live_server.path("/training-job-searches"), json={})
    assert found.json()["total"] == 0
