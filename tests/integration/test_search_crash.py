"""kill -9 of the server in the middle of a search, twice, on SQLite and PostgreSQL: after
each restart the search goes on from the trials stored, and completes; every trial ran
exactly once (each start is counted in a file outside corral)."""

from __future__ import annotations

import collections
import pathlib
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from corral.store import db, kind_tables
from tests import factories as f
from tests.integration import search_rig as rig
from tests.integration.test_crash import ServerProcess, kill_jobs

pytestmark = pytest.mark.slow


@pytest.fixture
def server(tmp_path: pathlib.Path, db_url: str) -> Iterator[ServerProcess]:
    srv = ServerProcess(tmp_path / "home", db_url)
    srv.start()
    shared = tmp_path / "shared"
    try:
        yield srv
    finally:
        srv.kill()
        srv.http.close()
        shared.mkdir(parents=True, exist_ok=True)
        kill_jobs(db_url, shared)


def _starts(count: pathlib.Path) -> list[str]:
    return [line.split()[0] for line in count.read_text().splitlines()] \
        if count.exists() else []


def test_kill_9_mid_search_loses_no_trial_and_runs_none_twice(
        server: ServerProcess, tmp_path: pathlib.Path, db_url: str) -> None:
    count = tmp_path / "starts.txt"
    body = rig.body(rig.code(tmp_path), rig.policy("tpe_search", samples=6, parallel=2),
                    steps=6, pause=0.3)
    body["algorithm"]["environments"] = {"COUNT_FILE": str(count)}
    r = server.http.post(f"/v2/{server.project_id}/training-jobs", json=body)
    assert r.status_code == 201, r.text
    job_id = r.json()["metadata"]["id"]

    for started in (2, 4):  # killed while trials run, twice
        f.wait_for(lambda n=started: len(_starts(count)) >= n, 120, f"{started} starts")
        server.kill()
        server.start()

    def phase() -> str:
        got = server.http.get(f"/v2/{server.project_id}/training-jobs/{job_id}")
        return str(got.json()["status"]["phase"])

    f.wait_for(lambda: phase() in {"Completed", "Failed"}, 180, "the search ends")
    assert phase() == "Completed"
    store = db.Store(db_url)
    try:
        with store.read() as conn:
            T = kind_tables.search_trials
            stored = list(conn.execute(sa.select(T).where(T.c.search_id == job_id)))
    finally:
        store.dispose()
    starts = collections.Counter(_starts(count))
    assert len(stored) == 6 and {t.state for t in stored} == {"completed"}
    assert starts == {t.job_id: 1 for t in stored}
