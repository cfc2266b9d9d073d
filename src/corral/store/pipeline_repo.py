"""SQL for pipelines, their attempts and the runs of their tasks (kinds/pipelines).

States move only through `kind_repo.transition` (guarded by the states they may come
from, with their event), so the controller and the API acting on one pipeline at once
never undo each other. Functions run on a connection the caller owns and never commit.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import sqlalchemy as sa

from corral.domain import errors
from corral.domain.pipelines import status
from corral.store import kind_repo, kind_rows, kind_tables

KIND = "pipeline"
PIPELINES = kind_tables.pipelines
ATTEMPTS = kind_tables.pipeline_attempts
RUNS = kind_tables.pipeline_runs
RUNNING = "running"


class PipelineNotFound(errors.NotFound):
    """The pipeline does not exist."""


class DuplicatePipeline(errors.DuplicateName):
    """A pipeline with this name already exists."""


# --- pipelines ------------------------------------------------------------------------------


def insert(conn: sa.Connection, values: Mapping[str, Any]) -> None:
    """A new pipeline; DuplicatePipeline when the project has a live one of its name."""
    taken = conn.execute(sa.select(PIPELINES.c.id).where(
        PIPELINES.c.project_id == values["project_id"], PIPELINES.c.name == values["name"],
        PIPELINES.c.deleted_at.is_(None))).first()
    message = f"a pipeline named '{values['name']}' already exists"
    if taken is not None:
        raise DuplicatePipeline(message)
    try:  # a name taken since by a concurrent insert fails here
        conn.execute(PIPELINES.insert(), dict(values))
    except sa.exc.IntegrityError:
        raise DuplicatePipeline(message) from None


def get(conn: sa.Connection, project_id: str, ref: str) -> kind_rows.Pipeline:
    """The project's live pipeline with this id, or else with this name (live ones' names
    are unique), or PipelineNotFound."""
    row = conn.execute(sa.select(PIPELINES).where(
        PIPELINES.c.project_id == project_id, PIPELINES.c.deleted_at.is_(None),
        sa.or_(PIPELINES.c.id == ref, PIPELINES.c.name == ref))
        .order_by(sa.desc(PIPELINES.c.id == ref)).limit(1)).first()
    if row is None:
        raise PipelineNotFound(f"pipeline '{ref}' does not exist")
    return kind_rows.Pipeline.of(row)


def by_id(conn: sa.Connection, pipeline_id: str) -> kind_rows.Pipeline | None:
    row = conn.execute(sa.select(PIPELINES).where(PIPELINES.c.id == pipeline_id)).first()
    return None if row is None else kind_rows.Pipeline.of(row)


def search(conn: sa.Connection, project_id: str, *, states: Collection[str] = (),
           name: str | None = None, offset: int = 0, limit: int = 20,
           ) -> tuple[int, list[tuple[kind_rows.Pipeline, kind_rows.PipelineAttempt]]]:
    """(how many match, the page of them, newest first) with each one's current attempt."""
    conds = [PIPELINES.c.project_id == project_id, PIPELINES.c.deleted_at.is_(None)]
    if states:
        conds.append(ATTEMPTS.c.state.in_(sorted(states)))
    if name is not None:
        conds.append(PIPELINES.c.name == name)
    joined = PIPELINES.join(ATTEMPTS, sa.and_(ATTEMPTS.c.pipeline_id == PIPELINES.c.id,
                                              ATTEMPTS.c.number == PIPELINES.c.attempt))
    total = conn.execute(sa.select(sa.func.count()).select_from(joined).where(*conds))
    q = (sa.select(PIPELINES, *_prefixed(ATTEMPTS)).select_from(joined).where(*conds)
         .order_by(PIPELINES.c.created_at.desc(), PIPELINES.c.id).offset(offset).limit(limit))
    return int(total.scalar_one()), [_pair(r) for r in conn.execute(q)]


def live(conn: sa.Connection) -> list[tuple[kind_rows.Pipeline, kind_rows.PipelineAttempt]]:
    """Pipelines the controller has work on: a running current attempt, or a deletion to
    finish."""
    joined = PIPELINES.join(ATTEMPTS, sa.and_(ATTEMPTS.c.pipeline_id == PIPELINES.c.id,
                                              ATTEMPTS.c.number == PIPELINES.c.attempt))
    q = (sa.select(PIPELINES, *_prefixed(ATTEMPTS)).select_from(joined)
         .where(sa.or_(ATTEMPTS.c.state == RUNNING, PIPELINES.c.deleted_at.is_not(None)))
         .order_by(PIPELINES.c.created_at))
    return [_pair(r) for r in conn.execute(q)]


def _prefixed(table: sa.Table) -> list[Any]:
    return [c.label(f"a_{c.name}") for c in table.columns]


def _pair(r: Any) -> tuple[kind_rows.Pipeline, kind_rows.PipelineAttempt]:
    m = r._mapping
    pipeline = kind_rows.Pipeline(**{c.name: m[c.name] for c in PIPELINES.columns})
    attempt = kind_rows.PipelineAttempt(**{c.name: m[f"a_{c.name}"] for c in ATTEMPTS.columns})
    return pipeline, attempt


def set_model(conn: sa.Connection, pipeline_id: str, name: str, version: int,
              now: int) -> None:
    conn.execute(PIPELINES.update().where(PIPELINES.c.id == pipeline_id).values(
        model_name=name, model_version=version, updated_at=now))


def mark_deleted(conn: sa.Connection, pipeline_id: str, now: int) -> bool:
    return conn.execute(PIPELINES.update().where(
        PIPELINES.c.id == pipeline_id, PIPELINES.c.deleted_at.is_(None)).values(
        deleted_at=now, updated_at=now)).rowcount == 1


def purge(conn: sa.Connection, pipeline_id: str) -> None:
    """Remove every row of the pipeline, its events too."""
    for table in (RUNS, ATTEMPTS):
        conn.execute(table.delete().where(table.c.pipeline_id == pipeline_id))
    conn.execute(PIPELINES.delete().where(PIPELINES.c.id == pipeline_id))
    kind_repo.delete_events(conn, KIND, pipeline_id)


# --- attempts -------------------------------------------------------------------------------


def add_attempt(conn: sa.Connection, pipeline_id: str, number: int, values: Mapping[str, Any],
                now: int) -> bool:
    """Make attempt `number` the pipeline's current one, if `number - 1` still is (False,
    and nothing written, when another request made it first)."""
    moved = conn.execute(PIPELINES.update().where(
        PIPELINES.c.id == pipeline_id, PIPELINES.c.attempt == number - 1).values(
        attempt=number, updated_at=now, model_name=None, model_version=None))
    if moved.rowcount != 1:
        return False
    conn.execute(ATTEMPTS.insert(), {**values, "pipeline_id": pipeline_id, "number": number,
                                     "state": RUNNING, "created_at": now})
    return True


def first_attempt(conn: sa.Connection, pipeline_id: str, values: Mapping[str, Any],
                  now: int) -> None:
    conn.execute(ATTEMPTS.insert(), {**values, "pipeline_id": pipeline_id, "number": 1,
                                     "state": RUNNING, "created_at": now})


def attempt(conn: sa.Connection, pipeline_id: str, number: int) -> kind_rows.PipelineAttempt:
    return kind_rows.PipelineAttempt.of(conn.execute(sa.select(ATTEMPTS).where(
        ATTEMPTS.c.pipeline_id == pipeline_id, ATTEMPTS.c.number == number)).one())


def attempts_of(conn: sa.Connection, pipeline_id: str) -> list[kind_rows.PipelineAttempt]:
    return kind_rows.PipelineAttempt.all(conn.execute(sa.select(ATTEMPTS).where(
        ATTEMPTS.c.pipeline_id == pipeline_id).order_by(ATTEMPTS.c.number)))


def _attempt_update(pipeline_id: str, number: int) -> Any:
    return ATTEMPTS.update().where(ATTEMPTS.c.pipeline_id == pipeline_id,
                                   ATTEMPTS.c.number == number)


def request_stop(conn: sa.Connection, pipeline_id: str, number: int, now: int) -> bool:
    """Ask a running attempt to stop; False when it has ended (or was asked already)."""
    q = _attempt_update(pipeline_id, number).where(
        ATTEMPTS.c.state == RUNNING, ATTEMPTS.c.stop_requested_at.is_(None))
    return conn.execute(q.values(stop_requested_at=now)).rowcount == 1


def hold_running(conn: sa.Connection, pipeline_id: str, number: int) -> bool:
    """Lock a running attempt's row for the caller's transaction, if it runs and nobody
    asked it to stop: a stop asked meanwhile waits for that transaction, and is then seen
    by the next pass (so a job submitted in it is stopped, never forgotten)."""
    q = _attempt_update(pipeline_id, number).where(
        ATTEMPTS.c.state == RUNNING, ATTEMPTS.c.stop_requested_at.is_(None))
    return conn.execute(q.values(progress=ATTEMPTS.c.progress)).rowcount == 1


def hold_ended(conn: sa.Connection, pipeline_id: str, number: int, now: int) -> bool:
    """Lock the pipeline's row for the caller's transaction if attempt `number` is still
    its current one and has ended: a rerun (which moves it to a new attempt) waits for that
    transaction, and then reads what it wrote."""
    locked = conn.execute(PIPELINES.update().where(
        PIPELINES.c.id == pipeline_id, PIPELINES.c.attempt == number).values(updated_at=now))
    return locked.rowcount == 1 and attempt(conn, pipeline_id, number).state != RUNNING


def set_attempt(conn: sa.Connection, pipeline_id: str, number: int, **values: Any) -> None:
    """Write some of an attempt's columns (never its state: that is `end_attempt`'s)."""
    assert "state" not in values
    conn.execute(_attempt_update(pipeline_id, number).values(**values))


def raise_progress(conn: sa.Connection, pipeline_id: str, number: int, progress: int) -> None:
    """The attempt's progress, which never goes down."""
    conn.execute(_attempt_update(pipeline_id, number).where(ATTEMPTS.c.progress < progress)
                 .values(progress=progress))


def end_attempt(conn: sa.Connection, pipeline_id: str, number: int, *, to: status.Status,
                now: int,
                message: str, level: str = "Info", why: str | None = None) -> bool:
    return kind_repo.transition(
        conn, ATTEMPTS, {"pipeline_id": pipeline_id, "number": number}, to=to,
        transitions=status.ATTEMPT_TRANSITIONS, kind=KIND, object_id=pipeline_id, now=now,
        message=message, level=level, values={"ended_at": now, "message": why, "progress": 100})


# --- runs -----------------------------------------------------------------------------------


def insert_runs(conn: sa.Connection, values: Sequence[Mapping[str, Any]]) -> None:
    if values:
        conn.execute(RUNS.insert(), [dict(v) for v in values])


def runs_of(conn: sa.Connection, pipeline_id: str,
            attempt: int | None = None) -> list[kind_rows.PipelineRun]:
    """The runs of one attempt (or of all), in the order they were made."""
    q = sa.select(RUNS).where(RUNS.c.pipeline_id == pipeline_id)
    if attempt is not None:
        q = q.where(RUNS.c.attempt == attempt)
    return kind_rows.PipelineRun.all(conn.execute(q.order_by(RUNS.c.attempt)))


def move_run(conn: sa.Connection, run: kind_rows.PipelineRun, *, to: status.TaskState,
             now: int, message: str, level: str = "Info",
             values: Mapping[str, Any] | None = None) -> bool:
    """Move a run to state `to`, with its event, if it is still in the state it was read in
    (a compare-and-set: the controller decides each step on the runs as it read them, so a
    step holds only while its run is unchanged) and `status.RUN_TRANSITIONS` allows `to`
    from there."""
    return kind_repo.transition(
        conn, RUNS, {"pipeline_id": run.pipeline_id, "attempt": run.attempt, "key": run.key},
        to=to, transitions=status.RUN_TRANSITIONS, was=status.TaskState(run.state), kind=KIND,
        object_id=run.pipeline_id, now=now, message=message, level=level,
        values={**(values or {}), "updated_at": now})


def set_run(conn: sa.Connection, run: kind_rows.PipelineRun, now: int, **values: Any) -> None:
    """Write some of a run's columns (never its state: that is `move_run`'s)."""
    assert "state" not in values
    conn.execute(RUNS.update().where(
        RUNS.c.pipeline_id == run.pipeline_id, RUNS.c.attempt == run.attempt,
        RUNS.c.key == run.key).values(**values, updated_at=now))


def cached_run(conn: sa.Connection, project_id: str, cache_key: str,
               since: int) -> kind_rows.PipelineRun | None:
    """The latest run of the project with this cache key that succeeded by itself since
    `since`, whose final metrics are read and whose outputs are still there."""
    q = (sa.select(RUNS).where(
        RUNS.c.project_id == project_id, RUNS.c.cache_key == cache_key,
        RUNS.c.state == "success", RUNS.c.origin == "run", RUNS.c.ended_at >= since,
        RUNS.c.metrics.is_not(None), RUNS.c.outputs_removed_at.is_(None))
        .order_by(RUNS.c.ended_at.desc()).limit(1))
    row = conn.execute(q).first()
    return None if row is None else kind_rows.PipelineRun.of(row)


def borrowers(conn: sa.Connection, pipeline_id: str) -> list[kind_rows.PipelineRun]:
    """Runs of other pipelines that use outputs of this one's runs (cached from them)."""
    prefix = f"{pipeline_id}/"
    return kind_rows.PipelineRun.all(conn.execute(sa.select(RUNS).where(
        RUNS.c.pipeline_id != pipeline_id, RUNS.c.origin == "cached",
        RUNS.c.source.like(f"{prefix}%"))))


def mark_outputs_removed(conn: sa.Connection, pipeline_id: str, keys: Collection[tuple[int, str]],
                         now: int) -> None:
    for attempt, key in keys:
        conn.execute(RUNS.update().where(
            RUNS.c.pipeline_id == pipeline_id, RUNS.c.attempt == attempt, RUNS.c.key == key)
            .values(outputs_removed_at=now, updated_at=now))


def loads(text: str | None) -> Any:
    """A JSON column's value (None for NULL)."""
    return None if text is None else json.loads(text)
