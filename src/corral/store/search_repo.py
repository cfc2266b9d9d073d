"""The searches and their trials: rows, guarded trial state changes (with events), and the
lists the controller and the API read."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa

from corral.domain import errors
from corral.domain.search import trials
from corral.store import kind_repo, kind_rows, kind_tables, schema

KIND = "search"
S = kind_tables.searches
T = kind_tables.search_trials
JOBS = schema.jobs


class NotASearch(errors.NotFound):
    """The training job is not a hyperparameter search."""


class TrialNotFound(errors.NotFound):
    """The trial does not exist."""


def insert(conn: sa.Connection, *, job_id: str, project_id: str, policy: Mapping[str, Any],
           model: tuple[str, str] | None, now: int) -> None:
    conn.execute(S.insert(), {
        "job_id": job_id, "project_id": project_id, "policy": dumps(policy),
        "model_name": model[0] if model else None,
        "model_channel": model[1] if model else None, "model_version": None,
        "best_trial": None, "started_at": None, "ended_at": None, "created_at": now,
        "updated_at": now})


def get(conn: sa.Connection, job_id: str) -> kind_rows.Search:
    """The search the job is, or NotASearch."""
    found = conn.execute(sa.select(S).where(S.c.job_id == job_id)).first()
    if found is None:
        raise NotASearch(f"training job '{job_id}' is not a hyperparameter search")
    return kind_rows.Search.of(found)


def live(conn: sa.Connection) -> list[kind_rows.Search]:
    """Searches not ended whose job is still there (the controller's work)."""
    q = (sa.select(S).join(JOBS, JOBS.c.id == S.c.job_id)
         .where(S.c.ended_at.is_(None)).order_by(S.c.created_at))
    return kind_rows.Search.all(conn.execute(q))


def set_search(conn: sa.Connection, job_id: str, now: int, **values: Any) -> None:
    conn.execute(S.update().where(S.c.job_id == job_id).values(updated_at=now, **values))


def trials_of(conn: sa.Connection, search_id: str) -> list[kind_rows.SearchTrial]:
    q = sa.select(T).where(T.c.search_id == search_id).order_by(T.c.number)
    return kind_rows.SearchTrial.all(conn.execute(q))


def trial(conn: sa.Connection, search_id: str, number: int) -> kind_rows.SearchTrial:
    found = conn.execute(sa.select(T).where(T.c.search_id == search_id,
                                            T.c.number == number)).first()
    if found is None:
        raise TrialNotFound(f"search '{search_id}' has no trial '{number}'")
    return kind_rows.SearchTrial.of(found)


def add_trial(conn: sa.Connection, search_id: str, number: int, job_id: str, *,
              params: Mapping[str, str], system_attrs: Mapping[str, Any], now: int) -> None:
    conn.execute(T.insert(), {
        "search_id": search_id, "number": number, "job_id": job_id,
        "state": trials.State.RUNNING.value, "stop_cause": None, "reason": None,
        "params": dumps(params), "system_attrs": dumps(system_attrs), "intermediate": "{}",
        "reward": None, "started_at": now, "ended_at": None, "updated_at": now})
    kind_repo.add_event(conn, KIND, search_id, now,
                        f"Trial {number} started: {_said(params)} (job {job_id})")


def set_progress(conn: sa.Connection, t: kind_rows.SearchTrial, now: int, *,
                 intermediate: Mapping[int, float], reward: float | None) -> None:
    """What a live trial reported so far."""
    conn.execute(T.update().where(T.c.search_id == t.search_id, T.c.number == t.number,
                                  T.c.state.in_(sorted(trials.LIVE)))
                 .values(intermediate=dumps({str(k): v for k, v in intermediate.items()}),
                         reward=reward, updated_at=now))


def set_attrs(conn: sa.Connection, t: kind_rows.SearchTrial, now: int,
              attrs: Mapping[str, Any]) -> None:
    """The sampler's and pruner's attributes of a trial (successive halving's rungs)."""
    conn.execute(T.update().where(T.c.search_id == t.search_id, T.c.number == t.number)
                 .values(system_attrs=dumps(attrs), updated_at=now))


def move(conn: sa.Connection, t: kind_rows.SearchTrial, to: trials.State, now: int, *,
         message: str, level: str = "Info", **values: Any) -> bool:
    """Move the trial to `to` if its state allows; with its event. False otherwise."""
    ended = {"ended_at": now} if to in trials.ENDED else {}
    return kind_repo.transition(
        conn, T, {"search_id": t.search_id, "number": t.number}, to=to,
        transitions=trials.TRANSITIONS, kind=KIND, object_id=t.search_id, now=now,
        message=message, level=level, values={**values, **ended, "updated_at": now})


def params(t: kind_rows.SearchTrial) -> dict[str, str]:
    out: dict[str, str] = json.loads(t.params)
    return out


def intermediate(t: kind_rows.SearchTrial) -> dict[int, float]:
    return {int(k): float(v) for k, v in json.loads(t.intermediate).items()}


def dumps(value: Mapping[str, Any]) -> str:
    return json.dumps(dict(value), separators=(",", ":"), sort_keys=True)


def _said(values: Mapping[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in values.items())
