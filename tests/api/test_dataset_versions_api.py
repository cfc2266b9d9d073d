"""Dataset versions on a live server, with jobs as real processes: a version freezes a
dataset's samples, a job reads one as a local folder and shows which, the model it is
registered as shows the version in its lineage; bad references are refused in the
ModelArts error body with nothing made."""

from __future__ import annotations

import hashlib
import json
import pathlib
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests import conftest
from tests import factories as f

pytestmark = pytest.mark.slow

#: a job that copies its input `data` (the version's samples and manifest) into its output
COPY = """
import pathlib, shutil, sys
args = dict(a[2:].split("=", 1) for a in sys.argv[1:])
src, out = pathlib.Path(args["data"]), pathlib.Path(args["train_url"])
out.mkdir(parents=True, exist_ok=True)
for p in src.iterdir():
    shutil.copy(p, out / p.name)
"""


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[conftest.Live]:
    server = conftest.start_live(tmp_path_factory.mktemp("dsv") / "home",
                                 storage_interval=0.2)
    yield server
    conftest.stop_live(server)


def ok(live: conftest.Live, method: str, path: str, status: int = 200,
       project_id: str | None = None, **kwargs: Any) -> Any:
    r = live.http.request(method, live.path(path, project_id), **kwargs)
    assert r.status_code == status, r.text
    return r.json()


def dataset(live: conftest.Live, root: pathlib.Path, name: str, lines: list[str],
            project_id: str | None = None) -> dict[str, Any]:
    index = root / f"{name}.txt"
    index.parent.mkdir(parents=True, exist_ok=True)
    index.write_text("".join(f"{line}\n" for line in lines))
    return dict(ok(live, "POST", "/datasets", 201, project_id,
                   json={"name": name, "url": str(index)}))


def reading(dataset_ref: str, version: str, root: pathlib.Path,
            **extra: Any) -> dict[str, Any]:
    """A job that reads `version` of dataset `dataset_ref` as input `data` and copies it to
    `root/out`."""
    body = f.make_job(code_dir=f.write_code(root, COPY), outputs={"train_url": str(root / "out")},
                      **extra)
    body["algorithm"]["inputs"] = [{"name": "data",
                                    "remote": {"dataset": {"id": dataset_ref,
                                                           "version_id": version}}}]
    return body


def test_a_version_freezes_the_samples_the_dataset_holds(
        live: conftest.Live, tmp_path: pathlib.Path) -> None:
    made = dataset(live, tmp_path, "frozen", ["a", "", "b", "c"])
    v1 = ok(live, "POST", "/datasets/frozen/versions", 201, json={"description": "first"})
    assert (v1["version_name"], v1["number_of_samples"], v1["description"]) == (
        "V0001", 3, "first")
    data = b"a\nb\nc\n"  # blank lines are no samples
    digest = hashlib.sha256(data).hexdigest()
    assert v1["files"] == [{"path": "samples.txt", "size": len(data), "sha256": digest}]
    assert v1["content_hash"].startswith("sha256:") and v1["dataset_id"] == made["id"]
    folder = pathlib.Path(v1["location"])
    assert folder.is_relative_to(live.settings.home / "datasets")
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["content_hash"] == v1["content_hash"]
    assert manifest["version"]["name"] == "V0001"

    ok(live, "POST", "/datasets/frozen/samples", json={"samples": ["d", "e"]})
    with (tmp_path / "frozen.txt").open("a") as fh:
        fh.write("f\n")  # by hand, too
    v2 = ok(live, "POST", f"/datasets/{made['id']}/versions", 201)
    assert (v2["version_name"], v2["number_of_samples"]) == ("V0002", 6)
    assert v2["content_hash"] != v1["content_hash"]

    assert (folder / "samples.txt").read_bytes() == data  # V0001 unchanged
    for ref in ("V0001", "1", "v1", v1["version_id"]):
        assert ok(live, "GET", f"/datasets/frozen/versions/{ref}") == v1
    listed = ok(live, "GET", "/datasets/frozen/versions")
    assert listed["total"] == 2
    assert [v["version_name"] for v in listed["versions"]] == ["V0001", "V0002"]
    assert ok(live, "GET", "/datasets/frozen")["number_of_samples"] == 6
    r = live.http.get(live.path("/datasets/frozen/versions/V0009"))
    assert r.status_code == 404 and r.json()["error_code"] == "ModelArts.2775", r.text


def test_a_job_reads_a_version_and_its_model_shows_the_lineage(
        live: conftest.Live, tmp_path: pathlib.Path) -> None:
    dataset(live, tmp_path, "read", ["x1", "x2"])
    v1 = ok(live, "POST", "/datasets/read/versions", 201)
    ok(live, "POST", "/datasets/read/samples", json={"samples": ["x3"]})  # after V0001
    out = tmp_path / "out"
    job = live.submit(reading("read", "V0001", tmp_path, name="reads-v1"))
    ref = job["algorithm"]["inputs"][0]["remote"]["dataset"]
    assert ref == {"id": v1["dataset_id"], "version_id": v1["version_id"],
                   "obs_url": v1["location"], "name": "read", "version_name": "V0001"}
    local = job["algorithm"]["inputs"][0]["local_dir"]
    assert local.startswith(str(live.settings.runs_dir))  # its own copy

    ended = live.wait(job["metadata"]["id"], timeout=60)
    assert ended["status"]["phase"] == "Completed", ended["status"]
    assert ended["algorithm"]["inputs"][0]["remote"]["dataset"] == ref  # shown as read
    assert (out / "samples.txt").read_text() == "x1\nx2\n"  # not x3
    assert json.loads((out / "manifest.json").read_text())["version"]["id"] == v1["version_id"]
    said = [e["message"] for e in ok(live, "GET", f"/training-jobs/{job['metadata']['id']}"
                                     "/events?limit=100")["events"]]
    assert any("dataset 'read' version V0001" in m and v1["content_hash"] in m for m in said)

    version = f.wait_for(lambda: (r := live.http.get(live.path(
        "/models/reads-v1/versions/latest"))).status_code == 200 and r.json(),
        what="the model version")
    assert version["source_job_id"] == job["metadata"]["id"]
    assert version["datasets"] == [{
        "channel": "data", "dataset_id": v1["dataset_id"], "dataset_name": "read",
        "version_id": v1["version_id"], "version_name": "V0001",
        "content_hash": v1["content_hash"], "number_of_samples": 2}]
    assert version["inputs"] == {"data": v1["location"]}

    # a new version of the job reads the version it names
    v2 = ok(live, "POST", "/datasets/read/versions", 201)
    again = ok(live, "POST", f"/training-jobs/{job['metadata']['id']}/versions", 201, json={
        "algorithm": {"inputs": [{"name": "data", "remote": {"dataset": {
            "id": "read", "version_id": "V0002"}}}]}})
    assert live.wait(again["metadata"]["id"], timeout=60)["status"]["phase"] == "Completed"
    assert (out / "V0002" / "samples.txt").read_text() == "x1\nx2\nx3\n"
    shown = ok(live, "GET", f"/training-jobs/{again['metadata']['id']}/versions/V0002")
    assert shown["inputs"] == {"data": v2["location"]}


def jobs_total(live: conftest.Live) -> int:
    return int(ok(live, "POST", "/training-job-searches", json={})["total"])


def refused(live: conftest.Live, body: dict[str, Any]) -> str:
    before = jobs_total(live)
    r = live.http.post(live.path("/training-jobs"), json=body)
    assert r.status_code == 400, r.text
    assert r.json()["error_code"] == "ModelArts.2788"
    assert jobs_total(live) == before  # nothing made
    return str(r.json()["error_msg"])


def with_input(remote: dict[str, Any]) -> dict[str, Any]:
    body = f.make_job(command="true")
    body["algorithm"]["inputs"] = [{"name": "data", "remote": remote}]
    return body


def test_bad_dataset_references_are_refused_and_nothing_is_made(
        live: conftest.Live, tmp_path: pathlib.Path) -> None:
    mine = dataset(live, tmp_path / "mine", "mine", ["1"])
    ok(live, "POST", "/datasets/mine/versions", 201)
    other = live.new_project("dsv-other")
    theirs = dataset(live, live.settings.home / "projects" / other, "theirs", ["2"],
                     project_id=other)
    their_version = ok(live, "POST", "/datasets/theirs/versions", 201, other)

    assert "dataset 'nope' does not exist" in refused(
        live, with_input({"dataset": {"id": "nope", "version_id": "V0001"}}))
    assert "dataset 'mine' has no version 'V0007'" in refused(
        live, with_input({"dataset": {"id": "mine", "version_id": "V0007"}}))
    assert "remote.dataset.id is missing" in refused(
        live, with_input({"dataset": {"version_id": "V0001"}}))
    assert "remote.dataset.version_id is missing" in refused(
        live, with_input({"dataset": {"id": "mine"}}))
    assert "one of the two" in refused(live, with_input({
        "dataset": {"id": "mine", "version_id": "V0001"}, "obs": {"obs_url": str(tmp_path)}}))
    # another project's dataset, or its version beside a dataset of this project's
    assert f"dataset '{theirs['id']}' does not exist in this project" in refused(
        live, with_input({"dataset": {"id": theirs["id"],
                                      "version_id": their_version["version_id"]}}))
    assert f"has no version '{their_version['version_id']}'" in refused(
        live, with_input({"dataset": {"id": mine["id"],
                                      "version_id": their_version["version_id"]}}))
    r = live.http.get(live.path(f"/datasets/{theirs['id']}/versions"))
    assert r.status_code == 404, r.text  # nor listed here


def test_a_version_changed_on_disk_fails_the_job_that_would_read_it(
        live: conftest.Live, tmp_path: pathlib.Path) -> None:
    dataset(live, tmp_path, "tampered", ["t1", "t2"])
    v1 = ok(live, "POST", "/datasets/tampered/versions", 201)
    (pathlib.Path(v1["location"]) / "samples.txt").write_text("t1\nt2\nplanted\n")
    job = live.submit(reading("tampered", "V0001", tmp_path))
    ended = live.wait(job["metadata"]["id"], timeout=60)
    assert ended["status"]["phase"] == "Failed", ended["status"]
    assert ended["status"]["secondary_phase"] == "CreateFailed"
    assert "was changed since the version was made" in ended["status"]["reason"]
    assert not (tmp_path / "out").exists()  # it never ran


def test_a_dataset_a_job_not_ended_reads_is_not_deleted(
        live: conftest.Live, tmp_path: pathlib.Path) -> None:
    dataset(live, tmp_path, "kept", ["k"])
    v1 = ok(live, "POST", "/datasets/kept/versions", 201)
    body = reading("kept", "V0001", tmp_path, name="sleeper")
    body["algorithm"]["code_dir"] = str(f.write_code(
        tmp_path, "import time; time.sleep(60)"))
    job_id = live.submit(body)["metadata"]["id"]
    r = live.http.delete(live.path("/datasets/kept"))
    assert r.status_code == 409 and "sleeper" in r.json()["error_msg"], r.text
    assert ok(live, "GET", "/datasets/kept/versions/V0001") == v1
    ok(live, "POST", f"/training-jobs/{job_id}/actions", 202,
       json={"action_type": "terminate"})
    live.wait(job_id, timeout=60)
    deadline = time.monotonic() + 30  # refused until the ended job is finished too
    while (r := live.http.delete(live.path("/datasets/kept"))).status_code == 409:
        assert time.monotonic() < deadline, r.text
        time.sleep(0.1)
    assert r.status_code == 200, r.text
    assert not pathlib.Path(v1["location"]).exists()  # its versions' files go with it
    r = live.http.post(live.path("/training-jobs"), json=reading("kept", "V0001", tmp_path))
    assert r.status_code == 400 and "dataset 'kept' does not exist" in r.json()["error_msg"]


def test_the_official_sdk_submits_a_job_that_reads_a_version(
        live: conftest.Live, tmp_path: pathlib.Path) -> None:
    from huaweicloudsdkmodelarts.v1 import model as ma

    from tests.api import test_sdk

    dataset(live, tmp_path, "viasdk", ["s1"])
    v1 = ok(live, "POST", "/datasets/viasdk/versions", 201)
    sdk = test_sdk.connect(live)
    body = test_sdk.sdk_job(
        "sdk-dataset", code_dir=f.write_code(tmp_path, COPY),
        inputs=[ma.Input(name="data", remote=ma.InputDataInfo(dataset=ma.InputDataInfoDataset(
            id=v1["dataset_id"], version_id=v1["version_id"])))],
        outputs=[ma.Output(name="train_url", remote=ma.Remote(obs=ma.RemoteObs(
            obs_url=str(tmp_path / "out"))))])
    created = test_sdk.create(sdk, body)
    assert created.status_code == 201
    shown = sdk.wait(created.metadata.id, {"Completed", "Failed"})
    assert shown.status.phase == "Completed"
    ref = shown.algorithm.inputs[0].remote.dataset
    assert (ref.id, ref.version_id, ref.obs_url, ref.name) == (
        v1["dataset_id"], v1["version_id"], v1["location"], "viasdk")
    assert (tmp_path / "out" / "samples.txt").read_text() == "s1\n"
    part = test_sdk.sdk_job("sdk-part", command="true", inputs=[ma.Input(
        name="data", remote=ma.InputDataInfo(dataset=ma.InputDataInfoDataset(
            id=v1["dataset_id"], version_id=v1["version_id"], dataset_proportion=50)))])
    with pytest.raises(Exception, match="corral gives a job the whole version"):
        test_sdk.create(sdk, part)
    sdk.client.get_http_client().close()


def test_the_cli_and_the_sdk_make_list_and_show_versions(
        live: conftest.Live, tmp_path: pathlib.Path) -> None:
    from corral.sdk import client, incremental
    from tests.api.test_cli import corral

    dataset(live, tmp_path, "bycli", ["c1", "c2"])
    made = corral(live, "datasets", "version", "create", "bycli", "--description", "two")
    assert made.exit_code == 0, made.output
    assert "dataset bycli version V0001: 2 sample(s), sha256:" in made.output
    listed = corral(live, "datasets", "version", "list", "bycli")
    assert listed.exit_code == 0 and "V0001" in listed.output and "two" in listed.output
    shown = corral(live, "datasets", "version", "show", "bycli", "1", "--json")
    assert shown.exit_code == 0, shown.output
    version = json.loads(shown.output)
    assert version["version_name"] == "V0001" and version["number_of_samples"] == 2
    missing = corral(live, "datasets", "version", "show", "bycli", "V0002")
    assert missing.exit_code != 0 and "has no version 'V0002'" in missing.output

    with client.Client(live.url, token=live.login.token,
                       project_id=live.project_id) as api:
        second = incremental.create_dataset_version(api, "bycli", "by the SDK")
        assert second["version_name"] == "V0002"
        assert [v["version_id"] for v in incremental.dataset_versions(api, "bycli")[
            "versions"]] == [version["version_id"], second["version_id"]]
        assert incremental.dataset_version(api, "bycli", "V0002") == second
        with pytest.raises(client.ClientError, match="has no version 'V0003'"):
            incremental.dataset_version(api, "bycli", "V0003")


def test_a_version_is_deleted_on_its_own_and_its_number_is_not_given_again(
        live: conftest.Live, tmp_path: pathlib.Path) -> None:
    from corral.sdk import client, incremental
    from tests.api.test_cli import corral

    dataset(live, tmp_path, "pruned", ["p1"])
    v1 = ok(live, "POST", "/datasets/pruned/versions", 201)
    v2 = ok(live, "POST", "/datasets/pruned/versions", 201)
    body = reading("pruned", "V0002", tmp_path, name="reader")
    body["algorithm"]["code_dir"] = str(f.write_code(tmp_path, "import time; time.sleep(60)"))
    job_id = live.submit(body)["metadata"]["id"]

    r = live.http.delete(live.path("/datasets/pruned/versions/V0002"))
    assert r.status_code == 409 and "reader" in r.json()["error_msg"], r.text
    ok(live, "DELETE", "/datasets/pruned/versions/1")  # by its number; no job reads it
    assert not pathlib.Path(v1["location"]).exists()
    assert [v["version_name"] for v in ok(live, "GET", "/datasets/pruned/versions")[
        "versions"]] == ["V0002"]
    r = live.http.get(live.path(f"/datasets/pruned/versions/{v1['version_id']}"))
    assert r.status_code == 404, r.text
    r = live.http.post(live.path("/training-jobs"), json=reading("pruned", "V0001", tmp_path))
    assert r.status_code == 400 and "has no version 'V0001'" in r.json()["error_msg"], r.text

    ok(live, "POST", f"/training-jobs/{job_id}/actions", 202,
       json={"action_type": "terminate"})
    live.wait(job_id, timeout=60)
    deadline = time.monotonic() + 30  # refused until the ended job is finished too
    while (gone := corral(live, "datasets", "version", "delete", "pruned", "V0002")
           ).exit_code != 0:
        assert time.monotonic() < deadline, gone.output
        time.sleep(0.1)
    assert "deleted dataset pruned version V0002" in gone.output
    assert not pathlib.Path(v2["location"]).exists()
    v3 = ok(live, "POST", "/datasets/pruned/versions", 201)
    assert v3["version_name"] == "V0003"  # not V0001 nor V0002 again
    with client.Client(live.url, token=live.login.token,
                       project_id=live.project_id) as api:
        incremental.delete_dataset_version(api, "pruned", v3["version_id"])
        assert incremental.dataset_versions(api, "pruned")["versions"] == []
        with pytest.raises(client.ClientError, match="has no version"):
            incremental.delete_dataset_version(api, "pruned", "V0003")
    ok(live, "DELETE", "/datasets/pruned")
