"""kill -9 of a real server while a pipeline runs, on SQLite and PostgreSQL: started again,
the pipeline goes on where it was; no task's job is submitted twice and none is forgotten.
"""

from __future__ import annotations

import collections
import pathlib
import time
from collections.abc import Iterator
from typing import Any

import pytest

from corral.store import db
from tests import conftest, factories
from tests import pipelines as pl
from tests.integration.test_crash import ServerProcess

pytestmark = pytest.mark.slow


@pytest.fixture
def corral(tmp_path: pathlib.Path, db_url: str) -> Iterator[ServerProcess]:
    srv = ServerProcess(tmp_path / "home", db_url)
    try:
        yield srv
    finally:
        srv.kill()
        srv.http.close()
        store = db.Store(db_url)
        try:
            conftest.kill_leftovers(store)
        finally:
            store.dispose()


def _pipeline(srv: ServerProcess, pid: str) -> dict[str, Any]:
    r = srv.http.get(srv.path(f"/pipelines/{pid}"))
    assert r.status_code == 200, r.text
    return dict(r.json())


def test_a_pipeline_goes_on_where_it_was_after_kill_9(corral: ServerProcess,
                                                       tmp_path: pathlib.Path) -> None:
    code, notes = pl.step_code(tmp_path), tmp_path / "notes"
    body = pl.pipeline(
        "crashy",
        pl.task("a", code, note=str(notes), sleep=0.3, outputs=("out_a",)),
        pl.task("fan", code, deps=("a",), note=str(notes), sleep=0.3,
                inputs={"in_a": "a.outputs.out_a"}, outputs=("out_f",),
                for_each=[{"tag": f"fan{i}"} for i in range(3)], parallelism=2),
        pl.task("z", code, deps=("fan",), note=str(notes), sleep=0.2,
                inputs={"in_f": "fan[2].outputs.out_f"}, outputs=("out_z",)))
    corral.start()
    r = corral.http.post(corral.path("/pipelines"), json=body)
    assert r.status_code == 201, r.text
    pid = r.json()["id"]

    # Killed at a few moments of its run: while a runs, while the fan-out runs, ...
    kills = 0
    for delay in (0.35, 0.5, 0.45, 0.3):
        time.sleep(delay)
        if _pipeline(corral, pid)["status"]["state"] != "running":
            break
        corral.kill()
        kills += 1
        corral.start()
    found = factories.wait_for(
        lambda: (p := _pipeline(corral, pid))["status"]["state"] != "running" and p, 60,
        "the pipeline to end")

    assert kills >= 2
    assert found["status"]["state"] == "success", found["tasks"]
    assert found["status"]["progress"] == 100
    ran = collections.Counter(line.split()[0] for line in notes.read_text().splitlines())
    assert ran == {"a": 1, "fan0": 1, "fan1": 1, "fan2": 1, "z": 1}
    z = next(t for t in found["tasks"] if t["key"] == "z")
    out = pathlib.Path(z["outputs"]["out_z"], "value.txt")
    assert out.read_text() == "a;fan2;z;"
    jobs = corral.all_jobs()
    assert len(jobs) == 5 and len({j["metadata"]["name"] for j in jobs}) == 5
    assert all(j["status"]["phase"] == "Completed" for j in jobs)
