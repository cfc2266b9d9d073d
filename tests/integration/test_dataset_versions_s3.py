"""A dataset whose index file is in object storage (a real S3 API server on loopback, see
tests/s3.py): its versions are kept beside it in its store, a job is given a version's URL
in its body and a checked local copy to read, and deleting the dataset removes them."""

from __future__ import annotations

import json
import pathlib
import uuid
from collections.abc import Iterator

import pytest

from tests import conftest, s3
from tests import factories as f
from tests.api import test_dataset_versions_api as api

pytestmark = pytest.mark.slow


@pytest.fixture
def world(tmp_path: pathlib.Path) -> Iterator[tuple[conftest.Live, s3.S3, str]]:
    store = s3.start()
    bucket = store.bucket()
    live = conftest.start_live(tmp_path / "home", s3=store.config, storage_interval=0.2,
                               upload_retry_delay=0.1)
    yield live, store, bucket
    conftest.stop_live(live)
    store.stop()


def test_a_remote_datasets_versions_live_beside_it_and_jobs_read_a_copy(
        world: tuple[conftest.Live, s3.S3, str], tmp_path: pathlib.Path) -> None:
    live, store, bucket = world
    store.put(bucket, "data/stream.csv", b"x,label\n1,a\n2,b\n")
    api.ok(live, "POST", "/datasets", 201, json={"name": "remote",
                                                 "url": f"s3://{bucket}/data/stream.csv"})
    v1 = api.ok(live, "POST", "/datasets/remote/versions", 201)
    prefix = f"data/stream.csv.versions/{v1['version_id']}/"
    assert v1["location"] == f"s3://{bucket}/{prefix.rstrip('/')}"
    assert store.keys(bucket, prefix) == [f"{prefix}manifest.json", f"{prefix}samples.csv"]
    assert store.get(bucket, f"{prefix}samples.csv") == b"x,label\n1,a\n2,b\n"
    assert v1["number_of_samples"] == 2
    store.put(bucket, "data/stream.csv", b"x,label\n1,a\n2,b\n3,c\n")  # grown since

    job = live.submit(api.reading("remote", v1["version_id"], tmp_path))
    assert job["algorithm"]["inputs"][0]["remote"]["dataset"]["obs_url"] == v1["location"]
    ended = live.wait(job["metadata"]["id"], timeout=60)
    assert ended["status"]["phase"] == "Completed", ended["status"]
    assert (tmp_path / "out" / "samples.csv").read_text() == "x,label\n1,a\n2,b\n"
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["content_hash"] == v1["content_hash"]

    # What a server killed while making a version left (its files, no row) goes when the
    # next version is made.
    half = f"data/stream.csv.versions/{uuid.uuid4()}/samples.csv"
    store.put(bucket, half, b"x,label\n")
    v2 = api.ok(live, "POST", "/datasets/remote/versions", 201)
    assert {k.split("/")[2] for k in store.keys(bucket, "data/stream.csv.versions/")} == {
        v1["version_id"], v2["version_id"]}

    f.wait_for(lambda: live.http.delete(live.path("/datasets/remote")).status_code == 200,
               what="the dataset deleted once its job is done with")
    assert store.keys(bucket, "data/stream.csv.versions/") == []
    assert store.keys(bucket, "data/") == ["data/stream.csv"]  # its index file stays
