"""The storage passes' work when the server loses its lease mid-way: a refused write is
the server's trouble, not the job's, and never counts towards the failures after which
finishing a job is given up (before, it did, and was logged as an error, job by job)."""

from __future__ import annotations

import logging
import types
from typing import Any

import pytest

from corral.domain import leadership
from corral.services import finishing, sync


def refused(*_args: Any, **_kwargs: Any) -> None:
    raise leadership.LostLease("epoch 3 is over: this server no longer leads")


def syncer() -> sync.Syncer:
    # (nothing of the store is reached: every write is refused before it)
    return sync.Syncer(store=None, settings=None, stores=None)  # type: ignore[arg-type]


def job(job_id: str) -> Any:
    return types.SimpleNamespace(id=job_id)


def test_a_refused_finish_is_never_counted_as_a_failure_of_the_job(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(finishing, "finish", refused)
    s = syncer()
    for _ in range(sync.MAX_FINISH_TRIES + 2):
        with pytest.raises(leadership.LostLease):
            s._finish(job("j1"))
    assert s._failures == {}  # never given up on: the next leader finishes it


def test_finishing_together_refused_is_not_tried_one_by_one_nor_logged_as_an_error(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(finishing, "finish_plain", refused)
    monkeypatch.setattr(finishing, "finish", refused)
    s = syncer()
    one_by_one: list[str] = []
    monkeypatch.setattr(s, "_finish", lambda j: one_by_one.append(j.id))
    caplog.set_level(logging.INFO, logger="corral.services.sync")

    s._run_batch([("finish", "j1"), ("finish", "j2")], s._finish_plain, [job("j1"), job("j2")])

    assert one_by_one == []
    assert [r.levelno for r in caplog.records] == [logging.INFO]
    assert "left to the next leader" in caplog.records[0].getMessage()
    assert s._busy == set()
