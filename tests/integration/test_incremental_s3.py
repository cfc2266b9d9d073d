"""A loop whose outputDir is in object storage (a real S3 API on loopback, tests/s3.py), on
this machine's executor: its rounds' files, the models it trains and deploys and its
service's acknowledgements live in the bucket, and its service hot-reloads each model
from its local copy of the deploy folder, which the server keeps up to date."""

from __future__ import annotations

import json
import pathlib
from collections.abc import Iterator

import pytest

from tests import conftest
from tests import s3 as s3_mod
from tests.integration import il_live

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def store() -> Iterator[s3_mod.S3]:
    s = s3_mod.start()
    yield s
    s.stop()


@pytest.fixture
def il(tmp_path: pathlib.Path, store: s3_mod.S3) -> Iterator[il_live.IL]:
    live = conftest.start_live(tmp_path / "home", cpus=4, storage_interval=0.2,
                               s3=store.config)
    try:
        world = il_live.IL(live.http, live.project_id, tmp_path / "work")
        world.initial_model("m", accuracy=0.5)
        world.dataset("stream")
        yield world
    finally:
        conftest.stop_live(live)


def test_a_loop_in_object_storage_trains_deploys_and_hot_reloads_from_the_bucket(
        il: il_live.IL, store: s3_mod.S3, tmp_path: pathlib.Path) -> None:
    bucket = store.bucket()
    il.create(il.spec(outputDir=f"s3://{bucket}/loops/helmet/"))
    for number, value in enumerate(("0.6", "0.8"), 1):
        il.append([value] * 4)
        done = il.wait_round(number, {"Promoted", "Rejected", "Failed"})
        assert done["state"] == "Promoted", done
        il.service_log_with(f"m-v{number + 1} accuracy={value}")
    assert [r[0] for r in il.runs()].count("serve") == 1  # reloaded, never restarted
    keys = store.keys(bucket, "loops/helmet/")
    for key in ("rounds/1/train.txt", "rounds/2/eval.txt", "rounds/2/model/model.json",
                "deploy/models/m-v1/model.json", "deploy/models/m-v3/model.json",
                "deploy/service/model_ack.json"):
        assert f"loops/helmet/{key}" in keys, keys
    assert store.get(bucket, "loops/helmet/rounds/2/train.txt") == b"0.8\n0.8\n"
    config = json.loads(store.get(bucket, "loops/helmet/deploy/model_config.json"))
    assert config["model_config"]["model_path"] == f"s3://{bucket}/loops/helmet/deploy/models/m-v3"
    # The service read a local copy of each (named so in the copy of model_config.json),
    # in its own run folder, never the bucket, and wrote its acknowledgement there too.
    home = str(tmp_path / "home")
    log = il.service_log()
    paths = [line.split()[1] for line in log.splitlines() if line.startswith("reloaded")]
    assert [p.rsplit("/", 1)[1] for p in paths] == ["m-v1", "m-v2", "m-v3"]
    assert all(p.startswith(home) for p in paths), paths
    ack = json.loads(store.get(bucket, "loops/helmet/deploy/service/model_ack.json"))
    assert ack["status"] == "loaded" and ack["model_update_time"].endswith("#3")
