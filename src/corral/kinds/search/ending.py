"""How a search ends once no trial of it runs: Terminated when it was stopped (or
deleted), Failed when no trial completed with a reward, else Completed with its best
trial, whose outputs are registered as a model version first (as a job registers its own:
`services.finishing.register`, which finds the version made before a crash)."""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from corral.domain import jobs
from corral.domain.search import spec, trials
from corral.kinds import owned
from corral.kinds.search import common
from corral.services import finishing
from corral.store import job_repo, kind_repo, kind_rows, rows, search_repo

State = trials.State


def best(search: spec.Search,
         stored: Sequence[kind_rows.SearchTrial]) -> kind_rows.SearchTrial | None:
    """The completed trial with the best reward (the first of equals)."""
    done = [t for t in stored if t.state == State.COMPLETED and t.reward is not None]
    if not done:
        return None
    sign = -1.0 if search.maximize else 1.0
    return min(done, key=lambda t: (sign * (t.reward or 0.0), t.number))


def done(search: spec.Search, s: kind_rows.Search, stored: Sequence[kind_rows.SearchTrial],
         job: rows.Job, now: int) -> bool:
    """Whether no trial is left to start: all run, its time budget spent, or stopped."""
    if job.phase == jobs.Phase.TERMINATING.value or job.deleted_at is not None:
        return True
    if job.phase != jobs.Phase.RUNNING.value:
        return False
    budget = search.time_budget_ms
    spent = bool(budget) and s.started_at is not None and now >= s.started_at + budget
    return len(stored) >= search.trials or spent


def end_if_done(platform: common.Platform, s: kind_rows.Search, search: spec.Search,
                job: rows.Job, now: int, refused: str | None = None) -> bool:
    """End the search if its trials have all ended and no other is due (or none can be
    submitted: `refused` says why); True when another pass is due at once."""
    with platform.store.read() as conn:
        stored = search_repo.trials_of(conn, s.job_id)
    if any(State(t.state) in trials.LIVE for t in stored):
        return False
    if refused is not None and job.phase == jobs.Phase.RUNNING.value:
        _failed(platform, s, job, stored, now, f"a trial could not be submitted: {refused}")
        return False
    if not done(search, s, stored, job, now):
        return False
    if job.phase == jobs.Phase.TERMINATING.value or job.deleted_at is not None:
        _stopped(platform, s, job, now)
        return False
    winner = best(search, stored)
    if winner is None:
        _failed(platform, s, job, stored, now)
        return False
    return _completed(platform, s, job, winner, now)


def _stopped(platform: common.Platform, s: kind_rows.Search, job: rows.Job, now: int) -> None:
    with platform.store.begin() as conn:
        if job.deleted_at is not None:
            owned.delete(conn, common.owner(job), now)
        job_repo.transition(conn, job.id, jobs.Phase.TERMINATED, jobs.SecondaryPhase.TERMINATED,
                            now=now, message="Job terminated: its trials are stopped",
                            fields={"end_time": now, "failure_class":
                                    jobs.FailureClass.STOPPED.value,
                                    "failure_message": "stopped on request"})
        _close(conn, s, job, now)


def _failed(platform: common.Platform, s: kind_rows.Search, job: rows.Job,
            stored: Sequence[kind_rows.SearchTrial], now: int, why: str | None = None) -> None:
    first = next((t for t in stored if t.reason), None)
    why = why or "no trial completed with a reward" + (
        f" (trial {first.number}: {first.reason})" if first else "")
    with platform.store.begin() as conn:
        job_repo.transition(conn, job.id, jobs.Phase.FAILED, jobs.SecondaryPhase.FAILED,
                            now=now, message=f"Search failed: {why}", level="Warning",
                            fields={"end_time": now, "failure_message": why})
        _close(conn, s, job, now)


def _completed(platform: common.Platform, s: kind_rows.Search, job: rows.Job,
               winner: kind_rows.SearchTrial, now: int) -> bool:
    version, problem = None, None
    if s.model_name:
        with platform.store.read() as conn:
            best_job = job_repo.job_by_id(conn, winner.job_id)
        if best_job is None:
            problem = "the best trial's job is gone"
        elif best_job.finalized_at is None:
            return False  # its last upload and metrics are not done: a later pass
        else:
            version, problem = _register(platform, s, best_job, now)
    with platform.store.begin() as conn:
        if version is not None:
            kind_repo.add_event(conn, common.KIND, job.id, now,
                                f"Model {s.model_name} version {version} registered from "
                                f"trial {winner.number}")
        if problem is not None:
            kind_repo.add_event(conn, common.KIND, job.id, now, level="Warning",
                                message=f"Model not registered: {problem}")
        search_repo.set_search(conn, job.id, now, best_trial=winner.number,
                               model_version=version)
        job_repo.transition(conn, job.id, jobs.Phase.COMPLETED, jobs.SecondaryPhase.COMPLETED,
                            now=now, fields={"end_time": now},
                            message=f"Search completed: best trial {winner.number}, reward "
                                    f"{winner.reward:g} ({_said(winner)})")
        _close(conn, s, job, now)
    return False


def _register(platform: common.Platform, s: kind_rows.Search, best_job: rows.Job,
              now: int) -> tuple[int | None, str | None]:
    assert s.model_name and s.model_channel
    try:
        made = finishing.register(platform.store, platform.stores, platform.settings,
                                  best_job, s.model_name, s.model_channel, lambda: now)
    except Exception as exc:  # any store's failure (botocore raises its own types)
        return None, str(getattr(exc, "message", None) or exc) or type(exc).__name__
    return int(made.version), None


def _close(conn: sa.Connection, s: kind_rows.Search, job: rows.Job, now: int) -> None:
    """The search's row ended, its job finished with (it has no task or output of its own
    for the storage component to finish)."""
    search_repo.set_search(conn, s.job_id, now, ended_at=now)
    job_repo.set_finalized(conn, [job.id], now)


def _said(t: kind_rows.SearchTrial) -> str:
    return ", ".join(f"{k}={v}" for k, v in search_repo.params(t).items())
