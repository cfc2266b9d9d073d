"""Datasets whose index file is slow to read or write (object storage far away), on a live
server on PostgreSQL, whose write transactions the database ends once they have waited
leader_lease less the margin for their server (docs/high-availability.md): a dataset's
file is read and written outside any write transaction, so a slow one is made and appended
to, its samples once, and counted."""

from __future__ import annotations

import pathlib
import time
from collections.abc import Iterator
from typing import Any

import pytest

from corral.storage import indexfiles
from tests import conftest
from tests.integration import il_live

pytestmark = pytest.mark.slow

#: the lease (s): its write transactions may wait 1.4 s for the server; the file takes longer
LEASE, SLOW_S = 2.0, 2.5


@pytest.fixture
def il(tmp_path: pathlib.Path, pg_url: str) -> Iterator[il_live.IL]:
    server = conftest.start_live(tmp_path / "home", cpus=4, database_url=pg_url,
                                 leader_lease=LEASE, leader_renew=0.5)
    try:
        yield il_live.IL(server.http, server.project_id, tmp_path / "work")
    finally:
        conftest.stop_live(server)


def slowly(real: Any) -> Any:
    def slow(*args: Any) -> Any:
        out = real(*args)
        time.sleep(SLOW_S)
        return out
    return slow


def test_a_slow_dataset_is_made_and_appended_to_once(
        il: il_live.IL, monkeypatch: pytest.MonkeyPatch) -> None:
    with monkeypatch.context() as m:
        m.setattr(indexfiles, "read", slowly(indexfiles.read))
        made = il.dataset("stream", ["1", "2"])
    assert made["number_of_samples"] == 2
    monkeypatch.setattr(indexfiles, "append", slowly(indexfiles.append))
    assert il.append(["3"]) == {"appended": 1, "number_of_samples": 3}
    assert (il.root / "stream.txt").read_text().split() == ["1", "2", "3"]
    assert il.ok("GET", "/datasets/stream")["number_of_samples"] == 3
