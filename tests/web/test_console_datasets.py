"""The console shows a dataset version's way into a model, against a real `corral server`:
a job that read a version names it among its inputs, and the model version it made names
it in its lineage (job -> dataset version -> model version)."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator
from typing import Any

import pytest

from tests import factories
from tests.api import test_dataset_versions_api as api
from tests.web import live
from tests.web.conftest import Console, console_for


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[live.Server]:
    with live.running(tmp_path_factory.mktemp("datasets") / "home") as s:
        yield s


@pytest.fixture
def console(browser: Any, srv: live.Server) -> Iterator[Console]:
    yield from console_for(browser, srv)


def test_a_model_versions_lineage_reaches_the_dataset_version_its_job_read(
        console: Console, tmp_path: pathlib.Path) -> None:
    from playwright.sync_api import expect

    srv = console.srv
    index = tmp_path / "stream.txt"
    index.write_text("a\nb\nc\n")
    srv.ok("POST", srv.path("/datasets"), 201, json={"name": "stream", "url": str(index)})
    v1 = srv.ok("POST", srv.path("/datasets/stream/versions"), 201)
    job_id = srv.submit(api.reading("stream", "V0001", tmp_path, name="from-stream"))
    assert srv.wait(job_id)["status"]["phase"] == "Completed"
    factories.wait_for(lambda: srv.http.get(srv.path("/models/from-stream")).status_code == 200,
                       30, "the model registered")

    page = console.project(f"jobs/{job_id}")
    expect(page.get_by_test_id("dataset-data")).to_contain_text(
        "dataset stream version V0001")
    page = console.project("models/from-stream")
    lineage = page.get_by_test_id("model-versions")
    expect(lineage).to_contain_text("from-stream")  # the job
    expect(page.get_by_test_id("datasets-v1")).to_contain_text(
        f"read dataset stream V0001 as data · 3 samples · {v1['content_hash'][:19]}")
