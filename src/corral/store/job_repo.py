"""Jobs, their attempts, tasks, events and resource samples, as functions over a connection
the caller owns (nothing here commits).

The one way a job's phase changes is `transition`: an UPDATE guarded by the phases the
transition table allows, with its event, in the caller's transaction. The other writes to
a job name the columns they change, and none of them is its phase.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import sqlalchemy as sa

from corral.domain import errors, jobs, specs
from corral.domain.search import spec as search_spec
from corral.store import rows, schema

JOBS = schema.jobs
TASKS = schema.tasks
ATTEMPTS = schema.attempts
EVENTS = schema.job_events
SAMPLES = schema.task_metrics

ACTIVE = [p.value for p in jobs.ACTIVE]
LIVE = [jobs.TaskState.LAUNCHING.value, jobs.TaskState.RUNNING.value]
WAITING = [jobs.Phase.CREATING.value, jobs.Phase.PENDING.value]

# Built once: the API and the scheduler run these for every job, many times, and building
# a statement (with its cache key) costs more than running it (tests/unit/test_reconciler.py).
_JOB = sa.select(JOBS).where(JOBS.c.id == sa.bindparam("k_id"))
_LIVE_JOB = _JOB.where(JOBS.c.project_id == sa.bindparam("k_project"),
                       JOBS.c.deleted_at.is_(None))
_ATTEMPTS = (sa.select(ATTEMPTS).where(ATTEMPTS.c.job_id == sa.bindparam("k_job"))
             .order_by(ATTEMPTS.c.seq))
_LATEST_ATTEMPT = (sa.select(sa.func.max(ATTEMPTS.c.seq))
                   .where(ATTEMPTS.c.job_id == sa.bindparam("k_job")))
_TASKS = (sa.select(TASKS).where(TASKS.c.job_id == sa.bindparam("k_job"),
                                 TASKS.c.attempt == sa.bindparam("k_attempt"))
          .order_by(TASKS.c.rank))
_SET_JOB = JOBS.update().where(JOBS.c.id == sa.bindparam("k_id"))
#: per phase, the update that moves a job there from a phase the transition table allows
_MOVE = {p: _SET_JOB.where(JOBS.c.phase.in_(sorted(f.value for f in jobs.allowed_from(p))))
         for p in jobs.Phase}
_SET_TASK = TASKS.update().where(TASKS.c.job_id == sa.bindparam("k_job"),
                                 TASKS.c.attempt == sa.bindparam("k_attempt"),
                                 TASKS.c.name == sa.bindparam("k_name"))
_SET_LIVE_TASK = _SET_TASK.where(TASKS.c.state.in_(LIVE))
_NAME_TAKEN = sa.select(JOBS.c.id).where(JOBS.c.project_id == sa.bindparam("k_project"),
                                         JOBS.c.name == sa.bindparam("k_name"),
                                         JOBS.c.deleted_at.is_(None))
_NEXT_SEQ = sa.select(sa.func.coalesce(sa.func.max(JOBS.c.seq), 0) + 1)
_INSERT_JOB = JOBS.insert()
_OWNERS = sa.select(JOBS.c.id, JOBS.c.owner_kind.is_not(None).label("owned")).where(
    JOBS.c.id.in_(sa.bindparam("k_ids", expanding=True)))
_NOTE_WAIT = _SET_JOB.where(JOBS.c.phase.in_(WAITING))
_DELETED = sa.select(JOBS.c.id, JOBS.c.phase).where(JOBS.c.deleted_at.is_not(None))
# Jobs holding resources (a job still fetching its inputs holds none, unless it is being
# stopped; a search's own job never does), and the tasks of every attempt of theirs.
_ACTIVE_JOBS = (sa.select(JOBS).where(
    JOBS.c.phase.in_(ACTIVE),
    sa.or_(JOBS.c.staging.is_(None),
           sa.and_(JOBS.c.phase == jobs.Phase.TERMINATING.value,
                   JOBS.c.staging != search_spec.JOB_STAGING)))
    .order_by(JOBS.c.seq))
_ACTIVE_TASKS = (sa.select(TASKS).join(JOBS, JOBS.c.id == TASKS.c.job_id)
                 .where(JOBS.c.phase.in_(ACTIVE))
                 .order_by(TASKS.c.job_id, TASKS.c.attempt, TASKS.c.rank))
_LIVE_TASKS = (sa.select(TASKS, JOBS.c.phase.label("job_phase"))
               .join(JOBS, JOBS.c.id == TASKS.c.job_id).where(TASKS.c.state.in_(LIVE)))
_ADD_EVENTS = EVENTS.insert()
_OPEN_ATTEMPT = ATTEMPTS.insert()
_CLOSE_ATTEMPT = ATTEMPTS.update().where(ATTEMPTS.c.job_id == sa.bindparam("k_job"),
                                         ATTEMPTS.c.seq == sa.bindparam("k_seq"),
                                         ATTEMPTS.c.end_at.is_(None))
_INSERT_TASKS = TASKS.insert()
# Each job's attempts, and every task of theirs (records_of keeps the latest attempt's)
_ATTEMPTS_OF = (sa.select(ATTEMPTS)
                .where(ATTEMPTS.c.job_id.in_(sa.bindparam("k_jobs", expanding=True)))
                .order_by(ATTEMPTS.c.job_id, ATTEMPTS.c.seq))
_TASKS_OF = (sa.select(TASKS).where(TASKS.c.job_id.in_(sa.bindparam("k_jobs", expanding=True)))
             .order_by(TASKS.c.job_id, TASKS.c.rank))


def new_job_id() -> str:
    return str(uuid.uuid4())


# --- jobs ---------------------------------------------------------------------------------


def insert_job(conn: sa.Connection, values: Mapping[str, Any], *,
               check_name: bool = True) -> None:
    """Insert a job; `check_name=False` for a later version, which shares its family's name."""
    if check_name and name_taken(conn, values["project_id"], values["name"]):
        raise errors.DuplicateName(f"a training job named '{values['name']}' already exists")
    values = dict(values)
    if conn.dialect.name == "sqlite":
        # No sequences in SQLite; write transactions are serialised there, so max + 1 is safe.
        values["seq"] = conn.execute(_NEXT_SEQ).scalar_one()
    try:
        # A name taken by a concurrent insert since the check fails here; the caller's
        # transaction is then rolled back as the error propagates.
        conn.execute(_INSERT_JOB, values)
    except sa.exc.IntegrityError:
        raise errors.DuplicateName(
            f"a training job named '{values['name']}' already exists") from None


def name_taken(conn: sa.Connection, project_id: str, name: str) -> bool:
    return conn.execute(_NAME_TAKEN, {"k_project": project_id, "k_name": name}
                        ).first() is not None


def get_job(conn: sa.Connection, project_id: str, job_id: str) -> rows.Job:
    """A live (not deleted) job of the project, or NotFound."""
    r = conn.execute(_LIVE_JOB, {"k_id": job_id, "k_project": project_id}).first()
    if r is None:
        raise errors.NotFound(f"training job '{job_id}' does not exist")
    return rows.Job.of(r)


def job_by_id(conn: sa.Connection, job_id: str, *, lock: bool = False) -> rows.Job | None:
    """Any job, deleted or not; `lock` holds its row until the transaction ends."""
    q = _JOB.with_for_update() if lock else _JOB
    r = conn.execute(q, {"k_id": job_id}).first()
    return None if r is None else rows.Job.of(r)


def existing_jobs(conn: sa.Connection, job_ids: Sequence[str]) -> set[str]:
    """Those of `job_ids` that have a row (deleted or not)."""
    found: set[str] = set()
    for i in range(0, len(job_ids), 500):
        q = sa.select(JOBS.c.id).where(JOBS.c.id.in_(job_ids[i:i + 500]))
        found.update(conn.execute(q).scalars())
    return found


def owners(conn: sa.Connection, job_ids: Collection[str]) -> tuple[set[str], set[str]]:
    """Which of `job_ids` an object of a job kind owns, and which no object does (a job
    that does not exist is in neither)."""
    ids = sorted(job_ids)
    owned: set[str] = set()
    unowned: set[str] = set()
    for i in range(0, len(ids), 500):
        for r in conn.execute(_OWNERS, {"k_ids": ids[i:i + 500]}):
            (owned if r.owned else unowned).add(r.id)
    return owned, unowned


def owned_jobs(conn: sa.Connection, kind: str, owner_id: str) -> dict[str, rows.Job]:
    """The jobs an object of a job kind owns, live or deleted, by their role."""
    q = sa.select(JOBS).where(JOBS.c.owner_kind == kind, JOBS.c.owner_id == owner_id)
    return {j.owner_role or "": j for j in rows.Job.all(conn.execute(q))}


def job_spec(job: rows.Job) -> specs.JobCreate:
    return specs.JobCreate.model_validate_json(job.spec)


def transition(
    conn: sa.Connection, job_id: str, to: jobs.Phase, secondary: jobs.SecondaryPhase,
    *, now: int, message: str, level: str = "Info", fields: Mapping[str, Any] | None = None,
    events: Events | None = None,
) -> bool:
    """Move a job to `to` if the transition table allows it from its current phase.

    Returns False (and writes nothing) when the job is in no such phase any more. Its event
    goes to `events` when given (written with the others before the transaction commits).
    """
    values = {**(fields or {}), "phase": to.value, "secondary_phase": secondary.value,
              "updated_at": now}
    if conn.execute(_MOVE[to], {**values, "k_id": job_id}).rowcount != 1:
        return False
    if events is None:
        add_event(conn, job_id, now, message, level=level)
    else:
        events.add(job_id, now, message, level=level, moved_to=to.value)
    return True


def _set_job(conn: sa.Connection, job_id: str, now: int, **values: Any) -> bool:
    """Write some of a job's columns (never its phase: that is `transition`'s)."""
    assert "phase" not in values and "secondary_phase" not in values
    return conn.execute(_SET_JOB, {**values, "updated_at": now, "k_id": job_id}).rowcount == 1


def set_description(conn: sa.Connection, job_id: str, now: int, description: str) -> None:
    _set_job(conn, job_id, now, description=description)


def set_staging(conn: sa.Connection, job_id: str, now: int, *, staging: str | None,
                wait_reason: str | None) -> bool:
    """Say whether the job's inputs are still to be fetched (`staging`), and how far that
    is (`wait_reason`); False when the job is gone."""
    return _set_job(conn, job_id, now, staging=staging, wait_reason=wait_reason)


def set_wait_reason(conn: sa.Connection, job_id: str, now: int, reason: str) -> None:
    _set_job(conn, job_id, now, wait_reason=reason)


def set_failure_message(conn: sa.Connection, job_id: str, now: int, message: str) -> None:
    _set_job(conn, job_id, now, failure_message=message)


def note_wait(conn: sa.Connection, job_id: str, *, now: int, reason: str, code: str) -> bool:
    """Say why a job waits, if it still waits (False, and nothing written, otherwise)."""
    return conn.execute(_NOTE_WAIT, {"wait_reason": reason, "wait_code": code, "updated_at": now,
                            "k_id": job_id}).rowcount == 1


def request_preempt(conn: sa.Connection, job_id: str, now: int) -> bool:
    """Mark a running job to be preempted, if it still runs and was not marked already."""
    q = _SET_JOB.where(JOBS.c.phase == jobs.Phase.RUNNING.value,
                       JOBS.c.preempt_requested_at.is_(None))
    return conn.execute(q, {"preempt_requested_at": now, "updated_at": now,
                            "k_id": job_id}).rowcount == 1


def set_restart(conn: sa.Connection, job_id: str, now: int, *, at: int | None,
                reason: str | None) -> bool:
    """Say when a running job's next attempt may start (its backoff) and why, or (None)
    that it starts now; either way a stop corral made of its tasks is over. False if the
    job no longer runs."""
    q = _SET_JOB.where(JOBS.c.phase == jobs.Phase.RUNNING.value)
    return conn.execute(q, {"restart_at": at, "wait_reason": reason, "stop_cause": None,
                            "updated_at": now, "k_id": job_id}).rowcount == 1


def request_stop(conn: sa.Connection, job_id: str, now: int, *, cause: str,
                 reason: str) -> bool:
    """Mark a running job's tasks to be stopped for `cause` (a hang, its run time), once."""
    q = _SET_JOB.where(JOBS.c.phase == jobs.Phase.RUNNING.value, JOBS.c.stop_cause.is_(None))
    return conn.execute(q, {"stop_cause": cause, "wait_reason": reason, "updated_at": now,
                            "k_id": job_id}).rowcount == 1


def request_terminate(conn: sa.Connection, job_id: str, now: int, message: str) -> bool:
    return transition(
        conn, job_id, jobs.Phase.TERMINATING, jobs.SecondaryPhase.TERMINATING,
        now=now, message=message, fields={"terminate_requested_at": now})


def mark_deleted(conn: sa.Connection, job_id: str, now: int) -> None:
    _set_job(conn, job_id, now, deleted_at=now)


def set_finalized(conn: sa.Connection, job_ids: Sequence[str], now: int) -> None:
    """The storage component is done with these ended jobs."""
    if job_ids:
        conn.execute(JOBS.update().where(JOBS.c.id.in_(list(job_ids)))
                     .values(finalized_at=now))


def purge_job(conn: sa.Connection, job_id: str) -> None:
    for table in (schema.training_metrics, schema.metric_offsets, schema.job_versions,
                  SAMPLES, EVENTS, TASKS, ATTEMPTS):
        conn.execute(table.delete().where(table.c.job_id == job_id))
    conn.execute(JOBS.delete().where(JOBS.c.id == job_id))


def deleted_jobs(conn: sa.Connection) -> list[rows.DeletedJob]:
    return rows.DeletedJob.all(conn.execute(_DELETED))


def active_with_tasks(conn: sa.Connection) -> list[tuple[rows.Job, list[rows.Task]]]:
    """Every job holding resources, with the tasks of its latest attempt. A job whose
    inputs are still being fetched is not here (it is not queued yet), unless it is being
    stopped: it then ends as any job stopped before it started. A search's own job
    (`staging` set for good) holds none: its controller moves it (kinds/search/)."""
    found = rows.Job.all(conn.execute(_ACTIVE_JOBS))
    if not found:
        return []
    by_job: dict[str, list[rows.Task]] = {}
    for t in rows.Task.all(conn.execute(_ACTIVE_TASKS)):
        by_job.setdefault(t.job_id, []).append(t)
    out = []
    for job in found:
        tasks = by_job.get(job.id, [])
        last = max((t.attempt for t in tasks), default=0)
        out.append((job, [t for t in tasks if t.attempt == last]))
    return out


def ended_jobs(conn: sa.Connection, project_id: str) -> list[rows.EndedJob]:
    """The project's live ended jobs that retention may remove, newest first: those the
    storage component is done with, less those that registered a model."""
    with_model = sa.select(schema.model_versions.c.source_job_id)
    q = (sa.select(JOBS.c.id, JOBS.c.name, JOBS.c.project_id, JOBS.c.end_time)
         .where(JOBS.c.project_id == project_id, JOBS.c.deleted_at.is_(None),
                JOBS.c.phase.in_([p.value for p in jobs.TERMINAL]),
                JOBS.c.finalized_at.is_not(None), JOBS.c.end_time.is_not(None),
                JOBS.c.id.not_in(with_model))
         .order_by(JOBS.c.end_time.desc(), JOBS.c.seq.desc()))
    return rows.EndedJob.all(conn.execute(q))


SORT_COLUMNS = {
    "create_time": JOBS.c.create_time, "name": JOBS.c.name, "phase": JOBS.c.phase,
    "start_time": JOBS.c.start_time,
}


def search_jobs(conn: sa.Connection, project_id: str,
                search: specs.Search) -> tuple[int, int, list[rows.Job]]:
    """(jobs in the project, jobs matching, the requested page of them)."""
    live = [JOBS.c.project_id == project_id, JOBS.c.deleted_at.is_(None)]
    total = conn.execute(sa.select(sa.func.count()).select_from(JOBS).where(*live)).scalar_one()
    conds = live + [_filter_clause(f) for f in search.filters]
    count = total if not search.filters else conn.execute(
        sa.select(sa.func.count()).select_from(JOBS).where(*conds)).scalar_one()
    if search.sort_by == "duration":
        # Duration of finished jobs; running ones sort by how long they have run so far.
        end = sa.func.coalesce(JOBS.c.end_time, JOBS.c.updated_at)
        sort_col: Any = sa.case((JOBS.c.start_time.is_(None), 0),
                                else_=end - JOBS.c.start_time)
    else:
        sort_col = SORT_COLUMNS[search.sort_by]
    order = sort_col.asc() if search.order == "asc" else sort_col.desc()
    tie = JOBS.c.seq.asc() if search.order == "asc" else JOBS.c.seq.desc()
    q = sa.select(JOBS).where(*conds).order_by(order, tie).limit(search.limit)
    if search.cursor is None:
        q = q.offset(search.offset * search.limit)
    else:
        q = q.where(_after(sort_col, search.order, search.cursor))
    return int(total), int(count), rows.Job.all(conn.execute(q))


def next_cursor(search: specs.Search, page: Sequence[rows.Job]) -> str | None:
    """The cursor of the page after `page` (None: it was the last, or the search is sorted
    by a key no cursor pages by)."""
    if len(page) < search.limit or search.sort_by not in specs.CURSOR_SORTS:
        return None
    last = page[-1]
    raw = json.dumps([getattr(last, search.sort_by), last.seq]).encode()
    return base64.urlsafe_b64encode(raw).decode()


def _after(col: Any, order: str, cursor: str) -> Any:
    """Rows after the cursor's (its sort value, then its submission number), written so
    that the sort column's index bounds the scan."""
    try:
        value, seq = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        if not isinstance(seq, int) or not isinstance(value, str | int):
            raise ValueError(cursor)
    except (ValueError, TypeError):
        raise errors.BadParameter("cursor: not a cursor this search returned") from None
    if order == "asc":
        return sa.and_(col >= value, sa.or_(col > value, JOBS.c.seq > seq))
    return sa.and_(col <= value, sa.or_(col < value, JOBS.c.seq < seq))


def _filter_clause(f: specs.Filter) -> Any:
    col = {"name": JOBS.c.name, "phase": JOBS.c.phase,
           "secondary_phase": JOBS.c.secondary_phase, "create_time": JOBS.c.create_time,
           "description": JOBS.c.description, "user_name": JOBS.c.user_name,
           "pool_id": JOBS.c.pool_id, "kind": JOBS.c.kind,
           # a job no kind owns has none: "" finds it
           "owner_kind": sa.func.coalesce(JOBS.c.owner_kind, "")}[f.key]
    values: list[Any] = [int(v) for v in f.value] if f.key == "create_time" else list(f.value)
    if f.operator == "in":
        return col.in_(values)
    if f.operator == "not":
        return col.not_in(values)
    if f.operator == "between":
        lo, hi = values
        return col.between(lo, hi)
    # like: a substring match on any of the values, with the user's % and _ taken literally
    return sa.or_(*[col.like(f"%{escape_like(v)}%", escape="\\") for v in values])


def escape_like(v: str) -> str:
    return v.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


# --- events -------------------------------------------------------------------------------


def add_event(conn: sa.Connection, job_id: str, now: int, message: str, *,
              level: str = "Info", source: str = "Job") -> None:
    conn.execute(_ADD_EVENTS, {"job_id": job_id, "time": now, "level": level,
                                   "source": source, "message": message})


class Events:
    """Events written together, in the order they were added, by one statement.

    For a transaction that writes many (a reconciler pass): `write` them before it commits,
    so that they are part of it like any other row.
    """

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        #: the jobs events were added for, written or not (whoever waits on them is told
        #: once the transaction has committed)
        self.jobs: set[str] = set()
        #: the phase each job that moved was moved to, the last one where it moved twice
        #: (a job of `jobs` not named here kept its phase)
        self.moved: dict[str, str] = {}

    def add(self, job_id: str, now: int, message: str, *, level: str = "Info",
            source: str = "Job", moved_to: str | None = None) -> None:
        self.jobs.add(job_id)
        if moved_to is not None:
            self.moved[job_id] = moved_to
        self.rows.append({"job_id": job_id, "time": now, "level": level, "source": source,
                          "message": message})

    def write(self, conn: sa.Connection) -> None:
        if self.rows:
            conn.execute(_ADD_EVENTS, self.rows)
            self.rows = []


def list_events(conn: sa.Connection, job_id: str, *, offset: int, limit: int, order: str,
                level: str | None = None, pattern: str | None = None,
                start_time: int | None = None,
                end_time: int | None = None,
                source: str | None = None) -> tuple[int, list[rows.Event]]:
    conds = [EVENTS.c.job_id == job_id]
    if level:
        conds.append(EVENTS.c.level == level)
    if source:
        conds.append(EVENTS.c.source == source)
    if pattern:
        conds.append(EVENTS.c.message.like(f"%{escape_like(pattern)}%", escape="\\"))
    if start_time is not None and end_time is not None:
        conds.append(EVENTS.c.time.between(start_time, end_time))
    total = conn.execute(sa.select(sa.func.count()).select_from(EVENTS).where(*conds))
    key = EVENTS.c.id.asc() if order == "asc" else EVENTS.c.id.desc()
    q = sa.select(EVENTS).where(*conds).order_by(key).offset(offset).limit(limit)
    return int(total.scalar_one()), rows.Event.all(conn.execute(q))


# --- attempts (running records) and tasks ------------------------------------------------


def open_attempt(conn: sa.Connection, job_id: str, seq: int, now: int,
                 start_type: jobs.StartType) -> None:
    conn.execute(_OPEN_ATTEMPT, {"job_id": job_id, "seq": seq, "start_at": now,
                                     "start_type": start_type.value})


def close_attempt(conn: sa.Connection, job_id: str, seq: int, *, now: int, end_reason: str,
                  related_task: str | None = None,
                  end_recover: jobs.EndRecover | None = None,
                  failure_class: jobs.FailureClass | None = None) -> None:
    conn.execute(_CLOSE_ATTEMPT, {
        "end_at": now, "end_reason": end_reason, "end_related_task": related_task,
        "end_recover": end_recover.value if end_recover else None,
        "failure_class": failure_class.value if failure_class else None,
        "k_job": job_id, "k_seq": seq})


def withdraw_restart(conn: sa.Connection, job_id: str, seq: int) -> None:
    """The restart a closed running record announced (`end_recover: proc_restart`) will not
    follow: the job ended during its backoff."""
    conn.execute(ATTEMPTS.update().where(
        ATTEMPTS.c.job_id == job_id, ATTEMPTS.c.seq == seq,
        ATTEMPTS.c.end_recover == jobs.EndRecover.PROC_RESTART.value)
        .values(end_recover=None))


def attempts_of(conn: sa.Connection, job_id: str) -> list[rows.Attempt]:
    return rows.Attempt.all(conn.execute(_ATTEMPTS, {"k_job": job_id}))


def records_of(conn: sa.Connection, job_ids: Sequence[str]
               ) -> dict[str, tuple[list[rows.Attempt], list[rows.Task]]]:
    """Each job's attempts, and the tasks of its latest attempt: two queries however many
    jobs are asked for."""
    out: dict[str, tuple[list[rows.Attempt], list[rows.Task]]] = {j: ([], []) for j in job_ids}
    if not job_ids:
        return out
    for a in rows.Attempt.all(conn.execute(_ATTEMPTS_OF, {"k_jobs": list(job_ids)})):
        out[a.job_id][0].append(a)
    latest = {j: attempts[-1].seq for j, (attempts, _) in out.items() if attempts}
    if latest:
        # By job id alone, which the key's index finds (a list of (job, attempt) pairs
        # makes SQLite read every task); earlier attempts' tasks are dropped here.
        for t in rows.Task.all(conn.execute(_TASKS_OF, {"k_jobs": list(latest)})):
            if t.attempt == latest[t.job_id]:
                out[t.job_id][1].append(t)
    return out


def latest_attempt(conn: sa.Connection, job_id: str) -> int:
    return int(conn.execute(_LATEST_ATTEMPT, {"k_job": job_id}).scalar() or 0)


def latest_attempts(conn: sa.Connection, job_ids: Sequence[str]) -> dict[str, int]:
    """latest_attempt of several jobs (one query); jobs that never started are left out."""
    q = (sa.select(ATTEMPTS.c.job_id, sa.func.max(ATTEMPTS.c.seq).label("seq"))
         .where(ATTEMPTS.c.job_id.in_(list(job_ids))).group_by(ATTEMPTS.c.job_id))
    return {r.job_id: int(r.seq) for r in conn.execute(q)}


def insert_tasks(conn: sa.Connection, tasks: Sequence[rows.Task]) -> None:
    conn.execute(_INSERT_TASKS, [{f: getattr(t, f) for f in TASK_COLUMNS} for t in tasks])


def update_task(conn: sa.Connection, task: rows.Task, **values: Any) -> None:
    """Write some of a task's columns."""
    conn.execute(_SET_TASK, {**values, "k_job": task.job_id, "k_attempt": task.attempt,
                             "k_name": task.name})


def update_live_task(conn: sa.Connection, task: rows.Task, **values: Any) -> bool:
    """Write some of a task's columns while it may have a process (launching or running);
    False, and nothing written, once it has ended."""
    return conn.execute(_SET_LIVE_TASK, {**values, "k_job": task.job_id,
                                         "k_attempt": task.attempt,
                                         "k_name": task.name}).rowcount == 1


def tasks_of(conn: sa.Connection, job_id: str, attempt: int | None = None) -> list[rows.Task]:
    if attempt is None:
        attempt = latest_attempt(conn, job_id)
    return rows.Task.all(conn.execute(_TASKS, {"k_job": job_id, "k_attempt": attempt}))


def delete_tasks(conn: sa.Connection, job_id: str, attempt: int) -> None:
    """Remove an attempt's task rows (one that never ran and never will)."""
    conn.execute(TASKS.delete().where(TASKS.c.job_id == job_id, TASKS.c.attempt == attempt))


def live_tasks(conn: sa.Connection) -> list[rows.LiveTask]:
    """Tasks that may have a process: launching or running, with their job's phase."""
    return rows.LiveTask.all(conn.execute(_LIVE_TASKS))


TASK_COLUMNS = tuple(c.name for c in TASKS.columns)


# --- resource samples ---------------------------------------------------------------------


def add_samples(conn: sa.Connection, samples: Sequence[Mapping[str, Any]]) -> None:
    if samples:
        conn.execute(SAMPLES.insert(), [dict(s) for s in samples])


def samples_of(conn: sa.Connection, job_id: str, attempt: int, task: str,
               limit: int = 1440) -> list[rows.TaskMetric]:
    q = (sa.select(SAMPLES).where(SAMPLES.c.job_id == job_id, SAMPLES.c.attempt == attempt,
                                  SAMPLES.c.task == task)
         .order_by(SAMPLES.c.time.desc()).limit(limit))
    return list(reversed(rows.TaskMetric.all(conn.execute(q))))


def last_use(conn: sa.Connection, job_id: str, attempt: int, *, cpu: float,
             gpu: float) -> dict[str, tuple[int | None, int]]:
    """Per task of an attempt: (its last sample with more than `cpu` percent of a core or
    `gpu` percent of its GPUs in use, or None; its last sample)."""
    busy = sa.or_(SAMPLES.c.cpu_usage * JOBS.c.cpu > cpu, SAMPLES.c.gpu_util > gpu)
    q = (sa.select(SAMPLES.c.task, sa.func.max(sa.case((busy, SAMPLES.c.time))).label("busy"),
                   sa.func.max(SAMPLES.c.time).label("last"))
         .join(JOBS, JOBS.c.id == SAMPLES.c.job_id)
         .where(SAMPLES.c.job_id == job_id, SAMPLES.c.attempt == attempt)
         .group_by(SAMPLES.c.task))
    return {r.task: (r.busy, r.last) for r in conn.execute(q)}


def running_tasks(conn: sa.Connection) -> list[rows.RunningTask]:
    """Running tasks with a handle, with what their job was given (for sampling)."""
    q = (sa.select(TASKS.c.job_id, TASKS.c.attempt, TASKS.c.name, TASKS.c.handle,
                   TASKS.c.gpu_ids, JOBS.c.cpu, JOBS.c.memory_mb)
         .join(JOBS, JOBS.c.id == TASKS.c.job_id)
         .where(TASKS.c.state == jobs.TaskState.RUNNING.value, TASKS.c.handle.is_not(None)))
    return rows.RunningTask.all(conn.execute(q))
