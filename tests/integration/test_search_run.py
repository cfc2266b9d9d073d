"""Hyperparameter searches with real trial processes, on SQLite and PostgreSQL: trials as
owned jobs at most N at once, rewards from the log, the phase, the model, a stop."""

from __future__ import annotations

import json
import pathlib
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from corral.store import job_repo, model_repo, schema
from tests import conftest
from tests import factories as f
from tests.integration import search_rig as rig


@pytest.fixture
def live(tmp_path: pathlib.Path, db_url: str) -> Iterator[conftest.Live]:
    server = rig.start(tmp_path / "home", db_url)
    yield server
    conftest.stop_live(server)


def _overlap(live: conftest.Live, job_ids: list[str]) -> int:
    """The most of these jobs that ran at the same time (from their start and end)."""
    with live.embedded.platform.store.read() as conn:
        spans = [(j.start_time, j.end_time) for j in
                 (job_repo.job_by_id(conn, i) for i in job_ids) if j is not None]
    edges = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    most = now = 0
    for _t, step in edges:
        now += step
        most = max(most, now)
    return most


def test_search_runs_its_trials_and_completes_with_the_best(
        live: conftest.Live, tmp_path: pathlib.Path) -> None:
    out = tmp_path / "out"
    job = live.submit(rig.body(rig.code(tmp_path), rig.policy(samples=5, parallel=2),
                               outputs={"train_url": str(out)}))
    job_id = job["metadata"]["id"]
    done = live.wait(job_id, timeout=120)

    assert done["status"]["phase"] == "Completed", done["status"]
    trials = rig.trials(live, job_id)
    assert [t.state for t in trials] == ["completed"] * 5
    assert _overlap(live, [t.job_id for t in trials]) <= 2
    best = max(trials, key=lambda t: t.reward)
    # The reward is the last value the log said; the params reached the trial.
    lr, width = (out / f"trial-{best.number}" / "params.txt").read_text().split()
    assert f"{float(lr):g}" in best.params and width in best.params
    with live.embedded.platform.store.read() as conn:
        model = model_repo.get(conn, live.project_id, job["metadata"]["name"])
        version = model_repo.resolve(conn, model, None, None)
        names = [m.name for m in model_repo.list_models(conn, live.project_id)]
    assert names == [job["metadata"]["name"]]  # the trials register none of their own
    assert version.source_job_id == best.job_id


def test_a_search_whose_trials_all_fail_fails(live: conftest.Live,
                                              tmp_path: pathlib.Path) -> None:
    job = live.submit(rig.body(rig.code(tmp_path), rig.policy(samples=2), fail_above=0))
    done = live.wait(job["metadata"]["id"], timeout=120)

    assert done["status"]["phase"] == "Failed", done["status"]
    assert [t.state for t in rig.trials(live, job["metadata"]["id"])] == ["failed"] * 2


def test_stopping_a_search_stops_its_trials(live: conftest.Live,
                                            tmp_path: pathlib.Path) -> None:
    job = live.submit(rig.body(rig.code(tmp_path), rig.policy(samples=6, parallel=2),
                               steps=1000, pause=0.1))
    job_id = job["metadata"]["id"]
    f.wait_for(lambda: len(rig.trials(live, job_id)) == 2, 60, "two trials")
    r = live.http.post(live.path(f"/training-jobs/{job_id}/actions"),
                       json={"action_type": "terminate"})
    assert r.status_code == 202, r.text
    done = live.wait(job_id, timeout=60)

    assert done["status"]["phase"] == "Terminated"
    trials = rig.trials(live, job_id)
    assert [t.state for t in trials] == ["stopped"] * 2
    with live.embedded.platform.store.read() as conn:
        phases = {job_repo.job_by_id(conn, t.job_id).phase for t in trials}  # type: ignore[union-attr]
        n = conn.execute(sa.select(sa.func.count()).select_from(schema.jobs)).scalar_one()
    assert phases == {"Terminated"} and n == 3


def test_the_pruner_stops_trials_that_fall_behind_with_why(
        live: conftest.Live, tmp_path: pathlib.Path) -> None:
    policy = rig.policy("median_stop_search", samples=6, parallel=1, n_startup_trials=1,
                        n_warmup_steps=1, seed=7)
    job = live.submit(rig.body(rig.code(tmp_path), policy, steps=8, pause=0.25))
    done = live.wait(job["metadata"]["id"], timeout=180)

    assert done["status"]["phase"] == "Completed", done["status"]
    trials = rig.trials(live, job["metadata"]["id"])
    pruned = [t for t in trials if t.state == "pruned"]
    assert pruned, [(t.state, t.reward) for t in trials]
    assert all(t.reason.startswith("pruned by median_stop_search: reward") for t in pruned)
    with live.embedded.platform.store.read() as conn:
        phases = {job_repo.job_by_id(conn, t.job_id).phase for t in pruned}  # type: ignore[union-attr]
    assert phases == {"Terminated"}
    # A pruned trial ran fewer steps than one that ran to its end.
    first = trials[0]
    assert first.state == "completed"
    assert all(len(json.loads(t.intermediate)) < len(json.loads(first.intermediate))
               for t in pruned)


def test_rewards_reported_by_log_metrics_count(live: conftest.Live,
                                               tmp_path: pathlib.Path) -> None:
    policy = rig.policy(samples=2, regex="never says (this)")
    job = live.submit(rig.body(rig.code(tmp_path), policy, use_metrics="1"))
    done = live.wait(job["metadata"]["id"], timeout=120)

    assert done["status"]["phase"] == "Completed", done["status"]
    trials = rig.trials(live, job["metadata"]["id"])
    assert [t.state for t in trials] == ["completed"] * 2
    assert all(json.loads(t.intermediate).keys() == {"1", "2", "3", "4"} for t in trials)


def test_deleting_a_running_search_deletes_its_trials(live: conftest.Live,
                                                      tmp_path: pathlib.Path) -> None:
    job = live.submit(rig.body(rig.code(tmp_path), rig.policy(samples=4, parallel=2),
                               steps=1000, pause=0.1))
    job_id = job["metadata"]["id"]
    f.wait_for(lambda: len(rig.trials(live, job_id)) == 2, 60, "two trials")
    trial_jobs = [t.job_id for t in rig.trials(live, job_id)]

    r = live.http.delete(live.path(f"/training-jobs/{job_id}"))
    assert r.status_code == 202, r.text

    def gone() -> bool:
        return all(live.http.get(live.path(f"/training-jobs/{j}")).status_code == 404
                   for j in [job_id, *trial_jobs])
    f.wait_for(gone, 60, "the search and its trials deleted")
    # its rows go with its job's when that is purged, as any deleted job's are
    f.wait_for(lambda: not rig.trials(live, job_id), 30, "its trials' rows removed")


def test_grid_search_tries_every_cell_once(live: conftest.Live,
                                           tmp_path: pathlib.Path) -> None:
    policy = rig.policy("grid_search", samples=0, parallel=2)
    policy["search_params"][0]["discrete_points_num"] = "2"
    job = live.submit(rig.body(rig.code(tmp_path), policy))
    done = live.wait(job["metadata"]["id"], timeout=120)

    assert done["status"]["phase"] == "Completed", done["status"]
    cells = [tuple(sorted(json.loads(t.params).items()))
             for t in rig.trials(live, job["metadata"]["id"])]
    assert len(cells) == 6 and len(set(cells)) == 6
    assert {dict(c)["lr"] for c in cells} == {"0.0001", "0.1"}


def test_no_trial_starts_after_the_time_budget(live: conftest.Live,
                                               tmp_path: pathlib.Path) -> None:
    policy = rig.policy(samples=50, parallel=1, time_budget=1)
    job = live.submit(rig.body(rig.code(tmp_path), policy, steps=8, pause=0.1))
    done = live.wait(job["metadata"]["id"], timeout=120)

    assert done["status"]["phase"] == "Completed", done["status"]
    trials = rig.trials(live, job["metadata"]["id"])
    assert 1 <= len(trials) < 50 and {t.state for t in trials} == {"completed"}
    started = done["status"]["start_time"]
    assert all(t.started_at < started + 1000 for t in trials)


def test_a_trial_whose_job_is_deleted_fails_and_the_search_goes_on(
        live: conftest.Live, tmp_path: pathlib.Path) -> None:
    job = live.submit(rig.body(rig.code(tmp_path), rig.policy(samples=2, parallel=1),
                               steps=1000, pause=0.1))
    job_id = job["metadata"]["id"]
    first = f.wait_for(lambda: next(iter(rig.trials(live, job_id)), None), 60, "trial 0")
    r = live.http.delete(live.path(f"/training-jobs/{first.job_id}"))
    assert r.status_code == 202, r.text
    f.wait_for(lambda: rig.trials(live, job_id)[0].state == "failed", 60, "trial 0 failed")

    # (seen ended, or, if purged before the search's next pass, gone)
    assert rig.trials(live, job_id)[0].reason in {"its job is gone",
                                                  "its job ended Terminated: stopped on request"}
    f.wait_for(lambda: len(rig.trials(live, job_id)) == 2, 30, "trial 1")
    live.http.post(live.path(f"/training-jobs/{job_id}/actions"),
                   json={"action_type": "terminate"})
    assert live.wait(job_id, timeout=60)["status"]["phase"] == "Terminated"


def test_the_study_is_never_first_loaded_inside_a_write_transaction(
        live: conftest.Live, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading Optuna takes seconds: done while a write transaction is open, it held back
    every other writer that long (on SQLite the server's own renewal of its leadership
    lease too, which then ran out under load and stopped its scheduling)."""
    import contextlib
    import sys
    import threading

    from corral.kinds import search as search_pkg

    store = live.embedded.platform.fenced  # the leader's: the controllers write with it
    writing = threading.local()
    begin = store.begin

    @contextlib.contextmanager
    def noted_begin() -> Iterator[sa.Connection]:
        with begin() as conn:
            writing.now = True
            try:
                yield conn
            finally:
                writing.now = False

    seen: list[bool] = []

    class Spy:
        """An import finder that only notes whether the study is loaded by a thread in a
        write transaction."""

        def find_spec(self, name: str, *_args: object) -> None:
            if name == "corral.kinds.search.study":
                seen.append(getattr(writing, "now", False))
            return None

    monkeypatch.setattr(store, "begin", noted_begin)
    monkeypatch.delitem(sys.modules, "corral.kinds.search.study", raising=False)
    monkeypatch.delattr(search_pkg, "study", raising=False)
    monkeypatch.setattr(sys, "meta_path", [Spy(), *sys.meta_path])
    job = live.submit(rig.body(rig.code(tmp_path), rig.policy(samples=2, parallel=1),
                               steps=1))
    done = live.wait(job["metadata"]["id"], timeout=90)
    assert done["status"]["phase"] == "Completed", done["status"]
    assert seen and not any(seen), seen
