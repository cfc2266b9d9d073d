"""Every SQL statement corral runs, as functions over a connection the caller owns.

The one way a job's phase changes is `transition`: a guarded UPDATE that only applies
when the job is in a phase the transition table allows, plus its event, in the caller's
transaction. Nothing here commits.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import sqlalchemy as sa

from corral.domain import errors, specs
from corral.domain import jobs as jobs_mod
from corral.store import fast, schema

J = schema.jobs
T = schema.tasks
A = schema.attempts
E = schema.job_events
M = schema.task_metrics

DEFAULT_PROJECT_KEY = "default_project_id"
_ACTIVE = [p.value for p in jobs_mod.ACTIVE]
_LIVE = [jobs_mod.TaskState.LAUNCHING.value, jobs_mod.TaskState.RUNNING.value]
_FROM = {p: sorted(f.value for f in jobs_mod.allowed_from(p)) for p in jobs_mod.Phase}


def _p(name: str, **kw: Any) -> sa.BindParameter[Any]:
    return sa.bindparam(f"k_{name}", **kw)


def _among(col: sa.ColumnElement[Any], values: Iterable[str]) -> sa.ColumnElement[bool]:
    """`col IN (...)` of constants (phases, states) written into the statement itself.

    A list given to `in_` becomes an "expanding" parameter, which SQLAlchemy renders into
    the SQL again on every execution; the hot path runs about ten such statements a pass.
    """
    quoted: list[sa.ColumnElement[Any]] = [
        sa.literal_column("'" + v.replace("'", "''") + "'") for v in values]
    return col.in_(quoted) if quoted else sa.false()


# The reconciler's hot path runs these every tick. They are built once, with bind
# parameters: building a statement costs about five times what executing it does.
# UPDATEs carry no SET clause of their own; it comes from the parameters given.
_Q_PROJECT = sa.select(schema.projects.c.id).where(schema.projects.c.id == _p("project"))
_Q_NAME_TAKEN = sa.select(J.c.id).where(J.c.project_id == _p("project"), J.c.name == _p("name"),
                                       J.c.deleted_at.is_(None))
_Q_NEXT_SEQ = sa.select(sa.func.coalesce(sa.func.max(J.c.seq), 0) + 1)
_Q_LIVE_JOB = sa.select(J).where(J.c.id == _p("id"), J.c.project_id == _p("project"),
                                 J.c.deleted_at.is_(None))
_Q_JOB = sa.select(J).where(J.c.id == _p("id"))
_U_JOB = J.update().where(J.c.id == _p("id"))
#: per phase, the update that moves a job there from a phase the transition table allows
_U_JOB_TO = {p: _U_JOB.where(_among(J.c.phase, _FROM[p])) for p in jobs_mod.Phase}
# The scheduler's guards for what it decided from an earlier snapshot: a reason only for a
# job that still waits, a preemption only of a job that still runs and was not asked yet.
_U_JOB_WAITING = _U_JOB.where(_among(J.c.phase, [jobs_mod.Phase.CREATING.value,
                                                jobs_mod.Phase.PENDING.value]))
_U_JOB_PREEMPT = _U_JOB.where(J.c.phase == jobs_mod.Phase.RUNNING.value,
                              J.c.preempt_requested_at.is_(None))
_Q_ACTIVE = sa.select(J).where(_among(J.c.phase, _ACTIVE)).order_by(J.c.seq)
# The queue as the scheduler reads it: the first `limit` jobs of every (pool, priority,
# project) stream, which is all that fair share and backfill can reach in one pass.
# Only what placement needs: a long queue is read on every pass, and each column of each
# row costs a Python object. Only ids are ranked (a long queue sorts small rows), then the
# chosen rows are read.
_QUEUE_COLUMNS = (J.c.id, J.c.phase, J.c.cpu, J.c.memory_mb, J.c.gpu, J.c.accelerators,
                  J.c.node_count, J.c.wait_reason, J.c.wait_code, J.c.project_id,
                  J.c.pool_id, J.c.priority, J.c.seq, J.c.spread, J.c.gpu_type,
                  J.c.retry_limit)
#: the queue `decide` reads: new and admitted jobs, less those still fetching their inputs
_IN_QUEUE = sa.and_(_among(J.c.phase, [jobs_mod.Phase.CREATING.value,
                                       jobs_mod.Phase.PENDING.value]),
                    J.c.staging.is_(None))
_RANKED = (sa.select(J.c.id, sa.func.row_number().over(
               partition_by=(J.c.pool_id, J.c.priority, J.c.project_id),
               order_by=J.c.seq).label("stream_rank"))
           .where(_IN_QUEUE).subquery())
_Q_QUEUED = (sa.select(*_QUEUE_COLUMNS).join(_RANKED, _RANKED.c.id == J.c.id)
             .where(_RANKED.c.stream_rank <= _p("limit")).order_by(J.c.seq))
# One stream (one pool, priority and project: the usual case) needs no window function,
# which costs SQLite more than reading the rows.
_Q_STREAMS = (sa.select(J.c.pool_id, J.c.priority, J.c.project_id).where(_IN_QUEUE)
              .distinct().limit(2))


def _first_in(phase: jobs_mod.Phase) -> sa.Select[Any]:
    """The first queued jobs in `phase`, in submission order (the (phase, seq) index)."""
    return (sa.select(*_QUEUE_COLUMNS).where(J.c.phase == phase.value, J.c.staging.is_(None))
            .order_by(J.c.seq).limit(_p("limit")))


# It reads the first jobs of each phase in the order of the (phase, seq) index and merges
# them: `phase IN (...) ORDER BY seq` would read and sort the whole queue for a few rows.
_FIRST = sa.union_all(*(_first_in(phase).subquery().select()
                        for phase in (jobs_mod.Phase.CREATING, jobs_mod.Phase.PENDING))
                      ).subquery()
_Q_QUEUED_ONE = sa.select(_FIRST).order_by(_FIRST.c.seq).limit(_p("limit"))
_Q_NEW = _first_in(jobs_mod.Phase.CREATING)
_Q_DELETED = sa.select(J.c.id, J.c.phase).where(J.c.deleted_at.is_not(None))
_I_ATTEMPT = A.insert()
_U_ATTEMPT_OPEN = A.update().where(A.c.job_id == _p("job"), A.c.seq == _p("seq"),
                                   A.c.end_at.is_(None))
_Q_ATTEMPTS = sa.select(A).where(A.c.job_id == _p("job")).order_by(A.c.seq)
_Q_LATEST_ATTEMPT = sa.select(sa.func.max(A.c.seq)).where(A.c.job_id == _p("job"))
_Q_LATEST_ATTEMPTS = (sa.select(A.c.job_id, sa.func.max(A.c.seq).label("seq"))
                      .where(A.c.job_id.in_(_p("jobs", expanding=True))).group_by(A.c.job_id))
_U_FINALIZED = J.update().where(J.c.id.in_(_p("jobs", expanding=True)))
_I_TASK = T.insert()
_D_TASKS = T.delete().where(T.c.job_id == _p("job"), T.c.attempt == _p("attempt"))
_U_TASK = T.update().where(T.c.job_id == _p("job"), T.c.attempt == _p("attempt"),
                           T.c.name == _p("name"))
_Q_TASKS = (sa.select(T).where(T.c.job_id == _p("job"), T.c.attempt == _p("attempt"))
            .order_by(T.c.rank))
_Q_LIVE_TASKS = (sa.select(T, J.c.phase.label("job_phase")).join(J, J.c.id == T.c.job_id)
                 .where(_among(T.c.state, _LIVE)))
#: the tasks of every job holding resources, all attempts (the latest kept in Python)
_Q_ACTIVE_TASKS = (sa.select(T).join(J, J.c.id == T.c.job_id).where(_among(J.c.phase, _ACTIVE))
                   .order_by(T.c.job_id, T.c.attempt, T.c.rank))

# Every job's way from its submission to its end runs these: they go straight to the
# driver (see store/fast.py). Their SQL is the statements' above.
_P = fast.Prepared
_RUN_PROJECT, _RUN_NAME_TAKEN, _RUN_NEXT_SEQ = _P(_Q_PROJECT), _P(_Q_NAME_TAKEN), _P(_Q_NEXT_SEQ)
_RUN_INSERT_JOB = _P(J.insert().inline())
_RUN_LIVE_JOB, _RUN_JOB = _P(_Q_LIVE_JOB), _P(_Q_JOB)
_RUN_JOB_UPDATE, _RUN_JOB_WAITING = _P(_U_JOB), _P(_U_JOB_WAITING)
_RUN_JOB_TO = {p: _P(stmt) for p, stmt in _U_JOB_TO.items()}
_RUN_EVENT = _P(E.insert().inline())
_RUN_ACTIVE, _RUN_ACTIVE_TASKS = _P(_Q_ACTIVE), _P(_Q_ACTIVE_TASKS)
_RUN_QUEUED, _RUN_QUEUED_ONE = _P(_Q_QUEUED), _P(_Q_QUEUED_ONE)
_RUN_NEW, _RUN_STREAMS, _RUN_DELETED = _P(_Q_NEW), _P(_Q_STREAMS), _P(_Q_DELETED)
_RUN_OPEN_ATTEMPT, _RUN_CLOSE_ATTEMPT = _P(_I_ATTEMPT), _P(_U_ATTEMPT_OPEN)
_RUN_ATTEMPTS, _RUN_LATEST_ATTEMPT = _P(_Q_ATTEMPTS), _P(_Q_LATEST_ATTEMPT)
_RUN_INSERT_TASK, _RUN_TASK_UPDATE = _P(_I_TASK), _P(_U_TASK)
#: per set of states a task is expected in, its guarded update (made on first use)
_RUN_TASK_IN: dict[frozenset[str], fast.Prepared] = {}
_RUN_TASKS, _RUN_LIVE_TASKS = _P(_Q_TASKS), _P(_Q_LIVE_TASKS)


# --- projects -----------------------------------------------------------------------------


def ensure_default_project(conn: sa.Connection, now: int) -> str:
    """The id of the default project, created on first use (32 hex chars, as on ModelArts)."""
    row = conn.execute(sa.select(schema.meta.c.value).where(
        schema.meta.c.key == DEFAULT_PROJECT_KEY)).first()
    if row:
        return str(row[0])
    pid = secrets.token_hex(16)
    conn.execute(schema.projects.insert().values(id=pid, name="default", created_at=now))
    conn.execute(schema.meta.insert().values(key=DEFAULT_PROJECT_KEY, value=pid))
    return pid


def require_project(conn: sa.Connection, project_id: str) -> None:
    found = _RUN_PROJECT.first(conn, {"k_project": project_id})
    if not found:
        raise errors.ProjectNotFound(f"project '{project_id}' does not exist")


# --- jobs ---------------------------------------------------------------------------------


def new_job_id() -> str:
    return str(uuid.uuid4())


def insert_job(conn: sa.Connection, row: Mapping[str, Any], *, check_name: bool = True) -> None:
    """Insert a job; `check_name=False` for a later version, which shares its family's name."""
    if check_name and name_taken(conn, row["project_id"], row["name"]):
        raise errors.DuplicateName(f"a training job named '{row['name']}' already exists")
    values = dict(row)
    if conn.dialect.name == "sqlite":
        # No sequences in SQLite; write transactions are serialised there, so max + 1 is safe.
        values["seq"] = _RUN_NEXT_SEQ.scalar(conn)
    try:
        # A name taken by a concurrent insert since the check fails here; the caller's
        # transaction is then rolled back as the error propagates.
        _RUN_INSERT_JOB.run(conn, values)
    except sa.exc.IntegrityError:
        raise errors.DuplicateName(
            f"a training job named '{row['name']}' already exists") from None


def name_taken(conn: sa.Connection, project_id: str, name: str) -> bool:
    return _RUN_NAME_TAKEN.first(conn, {"k_project": project_id, "k_name": name}) is not None


def get_job(conn: sa.Connection, project_id: str, job_id: str) -> Any:
    """A live (not deleted) job of the project, or NotFound."""
    row = _RUN_LIVE_JOB.first(conn, {"k_id": job_id, "k_project": project_id})
    if row is None:
        raise errors.NotFound(f"training job '{job_id}' does not exist")
    return row


def job_by_id(conn: sa.Connection, job_id: str, *, lock: bool = False) -> Any:
    """Any job, deleted or not; `lock` holds its row until the transaction ends."""
    if lock:
        return conn.execute(_Q_JOB.with_for_update(), {"k_id": job_id}).first()
    return _RUN_JOB.first(conn, {"k_id": job_id})


def existing_jobs(conn: sa.Connection, job_ids: Sequence[str]) -> set[str]:
    """Those of `job_ids` that have a row (deleted or not)."""
    found: set[str] = set()
    for i in range(0, len(job_ids), 500):
        found.update(conn.execute(sa.select(J.c.id).where(J.c.id.in_(job_ids[i:i + 500])))
                     .scalars())
    return found


def job_spec(row: sa.Row[Any]) -> specs.JobCreate:
    return specs.JobCreate.model_validate_json(row.spec)


def transition(
    conn: sa.Connection, job_id: str, to: jobs_mod.Phase, secondary: jobs_mod.SecondaryPhase,
    *, now: int, message: str, level: str = "Info", fields: Mapping[str, Any] | None = None,
    events: Events | None = None,
) -> bool:
    """Move a job to `to` if the transition table allows it from its current phase.

    Returns False (and writes nothing) when the job is in no such phase any more. Its event
    goes to `events` when given (written with the others before the transaction commits).
    """
    values = {"phase": to.value, "secondary_phase": secondary.value, "updated_at": now}
    if fields:
        values.update(fields)
    if _RUN_JOB_TO[to].run(conn, {**values, "k_id": job_id}) != 1:
        return False
    if events is None:
        add_event(conn, job_id, now, message, level=level)
    else:
        events.add(job_id, now, message, level=level)
    return True


def update_job(conn: sa.Connection, job_id: str, *, now: int, **fields: Any) -> bool:
    return _RUN_JOB_UPDATE.run(conn, {**fields, "updated_at": now, "k_id": job_id}) == 1


def note_wait(conn: sa.Connection, job_id: str, *, now: int, reason: str, code: str) -> bool:
    """Say why a job waits, if it still waits (False, and nothing written, otherwise)."""
    return _RUN_JOB_WAITING.run(conn, {"wait_reason": reason, "wait_code": code,
                                       "updated_at": now, "k_id": job_id}) == 1


def request_preempt(conn: sa.Connection, job_id: str, now: int) -> bool:
    """Mark a running job to be preempted, if it still runs and was not marked already."""
    res = conn.execute(_U_JOB_PREEMPT, {"preempt_requested_at": now, "updated_at": now,
                                        "k_id": job_id})
    return res.rowcount == 1


def request_terminate(conn: sa.Connection, job_id: str, now: int, message: str) -> bool:
    return transition(
        conn, job_id, jobs_mod.Phase.TERMINATING, jobs_mod.SecondaryPhase.TERMINATING,
        now=now, message=message, fields={"terminate_requested_at": now})


def mark_deleted(conn: sa.Connection, job_id: str, now: int) -> None:
    conn.execute(_U_JOB, {"deleted_at": now, "updated_at": now, "k_id": job_id})


def projects(conn: sa.Connection) -> list[sa.Row[Any]]:
    return list(conn.execute(sa.select(schema.projects).order_by(schema.projects.c.name)))


def purge_job(conn: sa.Connection, job_id: str) -> None:
    for table in (schema.training_metrics, schema.metric_offsets, schema.job_versions,
                  M, E, T, A):
        conn.execute(table.delete().where(table.c.job_id == job_id))
    conn.execute(J.delete().where(J.c.id == job_id))


def deleted_jobs(conn: sa.Connection) -> list[Any]:
    return _RUN_DELETED.rows(conn)


def active_with_tasks(conn: sa.Connection) -> list[tuple[Any, list[Any]]]:
    """Every job holding resources, with the tasks of its latest attempt (two queries)."""
    jobs = _RUN_ACTIVE.rows(conn)
    if not jobs:
        return []
    by_job: dict[str, list[Any]] = {}
    for t in _RUN_ACTIVE_TASKS.rows(conn):
        by_job.setdefault(t.job_id, []).append(t)
    out = []
    for job in jobs:
        tasks = by_job.get(job.id, [])
        last = max((t.attempt for t in tasks), default=0)
        out.append((job, [t for t in tasks if t.attempt == last]))
    return out


def queue_order(keys: Mapping[tuple[str, str], float], heads: Sequence[str]) -> list[Any]:
    """ORDER BY terms for the queue in the order the scheduler considers it (see
    domain.scheduling.queue_order): priority, each priority's last head, the projects'
    fair-share `keys` per (project, pool) (0 for one without any), submission."""
    key: Any = sa.literal(0.0, sa.Float)
    if keys:
        key = sa.case(*[(sa.and_(J.c.project_id == project, J.c.pool_id == pool),
                         sa.literal(value, sa.Float))
                        for (project, pool), value in sorted(keys.items())], else_=key)
    first = sa.case((J.c.id.in_(list(heads)), 0), else_=1) if heads else sa.literal(1)
    return [J.c.priority.desc(), first, key, J.c.seq]


def queue_heads(conn: sa.Connection, head_codes: Iterable[str]) -> list[str]:
    """The last head of each pool and priority: its oldest queued job waiting with one of
    `head_codes` (it keeps its place against fair share)."""
    oldest = (sa.select(J.c.pool_id, J.c.priority, sa.func.min(J.c.seq).label("seq"))
              .where(_IN_QUEUE, J.c.wait_code.in_(list(head_codes)))
              .group_by(J.c.pool_id, J.c.priority).subquery())
    q = sa.select(J.c.id).join(oldest, sa.and_(J.c.pool_id == oldest.c.pool_id,
                                               J.c.priority == oldest.c.priority,
                                               J.c.seq == oldest.c.seq))
    return [r.id for r in conn.execute(q)]


def queue_positions(conn: sa.Connection, job_ids: Sequence[str],
                    order: Sequence[Any]) -> dict[str, int]:
    """How many queued jobs are ahead of each of these in its pool, in `order`
    (`queue_order`). A few jobs are counted one by one (no sort of the whole queue); a
    page of them is ranked in one query."""
    if not job_ids:
        return {}
    if len(job_ids) <= 4:
        return {job_id: n for job_id in job_ids
                if (n := _jobs_before(conn, job_id, order)) is not None}
    ranked = (sa.select(J.c.id, (sa.func.row_number().over(
                  partition_by=J.c.pool_id, order_by=list(order)) - 1).label("ahead"))
              .where(_IN_QUEUE).subquery())
    q = sa.select(ranked.c.id, ranked.c.ahead).where(ranked.c.id.in_(list(job_ids)))
    return {r.id: int(r.ahead) for r in conn.execute(q)}


def _jobs_before(conn: sa.Connection, job_id: str, order: Sequence[Any]) -> int | None:
    """Queued jobs of its pool that come before `job_id` in `order` (None if it is not
    queued): lexicographic on the order's terms, each compared with the job's own."""
    desc = [getattr(t, "modifier", None) is sa.sql.operators.desc_op for t in order]
    terms = [t.element if down else t for t, down in zip(order, desc, strict=True)]
    mine = conn.execute(sa.select(J.c.pool_id, *[t.label(f"t{i}") for i, t in enumerate(terms)])
                        .where(J.c.id == job_id, _IN_QUEUE)).first()
    if mine is None:
        return None
    before: Any = sa.false()
    for t, down, value in reversed(list(zip(terms, desc, mine[1:], strict=True))):
        ahead = t > value if down else t < value
        before = sa.or_(ahead, sa.and_(t == value, before))
    q = (sa.select(sa.func.count()).select_from(J)
         .where(_IN_QUEUE, J.c.pool_id == mine.pool_id, before))
    return int(conn.execute(q).scalar_one())


def held_totals(conn: sa.Connection) -> list[sa.Row[Any]]:
    """What the jobs holding resources hold, per project, pool and accelerators per task:
    cpu, memory_mb and gpu summed over their tasks, and the tasks (a job holding resources
    has node_count tasks)."""
    n = J.c.node_count
    return list(conn.execute(
        sa.select(J.c.project_id, J.c.pool_id, J.c.accelerators,
                  sa.func.sum(J.c.cpu * n).label("cpu"),
                  sa.func.sum(J.c.memory_mb * n).label("memory_mb"),
                  sa.func.sum(J.c.gpu * n).label("gpu"), sa.func.sum(n).label("tasks"))
        .where(J.c.phase.in_(_ACTIVE))
        .group_by(J.c.project_id, J.c.pool_id, J.c.accelerators)))


def queued(conn: sa.Connection, limit: int, single: bool | None = None) -> list[Any]:
    """Jobs waiting to start (new ones too), in submission order: the first `limit` of
    each pool, priority and project. `single`: what `single_stream` says, when known."""
    if single is None:
        single = single_stream(conn)
    return (_RUN_QUEUED_ONE if single else _RUN_QUEUED).rows(conn, {"k_limit": limit})


def new_jobs(conn: sa.Connection, limit: int) -> list[Any]:
    """The first `limit` jobs just submitted (Creating) that wait in the queue, in
    submission order, with the columns `queued` reads."""
    return _RUN_NEW.rows(conn, {"k_limit": limit})


def single_stream(conn: sa.Connection) -> bool:
    """Whether the queue holds jobs of one pool, priority and project at most: the usual
    case, read without ranking every queued job by its stream."""
    return len(_RUN_STREAMS.rows(conn)) <= 1


def pending_jobs(conn: sa.Connection, pool_id: str | None = None,
                 order: Sequence[Any] = ()) -> list[sa.Row[Any]]:
    """Every job waiting to start, by pool, without its spec: in `order` (`queue_order`;
    else highest priority first, then in submission order), jobs still fetching inputs
    last."""
    q = (sa.select(J.c.id, J.c.name, J.c.project_id, J.c.pool_id, J.c.priority,
                   J.c.node_count, J.c.flavor_id, J.c.create_time, J.c.phase, J.c.wait_code,
                   J.c.wait_reason)
         .where(J.c.phase.in_([jobs_mod.Phase.CREATING.value, jobs_mod.Phase.PENDING.value])))
    if pool_id is not None:
        q = q.where(J.c.pool_id == pool_id)
    terms = list(order) or [J.c.priority.desc(), J.c.seq]
    staging = sa.case((J.c.staging.is_(None), 0), else_=1)
    return list(conn.execute(q.order_by(J.c.pool_id, staging, *terms)))


def pending_counts(conn: sa.Connection) -> dict[str, int]:
    """How many jobs wait to start in each pool."""
    q = (sa.select(J.c.pool_id, sa.func.count()).where(J.c.phase.in_([
        jobs_mod.Phase.CREATING.value, jobs_mod.Phase.PENDING.value])).group_by(J.c.pool_id))
    return {pool: int(n) for pool, n in conn.execute(q)}


# --- quotas and usage ---------------------------------------------------------------------

Q = schema.quotas
U = schema.project_usage


def quotas(conn: sa.Connection, project_id: str | None = None) -> list[sa.Row[Any]]:
    q = sa.select(Q).order_by(Q.c.project_id, Q.c.pool_id)
    if project_id is not None:
        q = q.where(Q.c.project_id == project_id)
    return list(conn.execute(q))


def set_quotas(conn: sa.Connection, project_id: str, rows: Sequence[Mapping[str, Any]],
               now: int) -> None:
    """Replace the project's quotas with `rows` (one per pool)."""
    conn.execute(Q.delete().where(Q.c.project_id == project_id))
    if rows:
        conn.execute(Q.insert(), [{**r, "project_id": project_id, "updated_at": now}
                                  for r in rows])


def usage(conn: sa.Connection) -> list[sa.Row[Any]]:
    return list(conn.execute(sa.select(U)))


def save_usage(conn: sa.Connection, rows: Sequence[Mapping[str, Any]]) -> None:
    """Replace the recorded usage (a handful of rows: one per project and pool)."""
    conn.execute(U.delete())
    if rows:
        conn.execute(U.insert(), [dict(r) for r in rows])


SORT_COLUMNS = {
    "create_time": J.c.create_time, "name": J.c.name, "phase": J.c.phase,
    "start_time": J.c.start_time,
}


def search_jobs(conn: sa.Connection, project_id: str,
                search: specs.Search) -> tuple[int, int, list[sa.Row[Any]]]:
    """(jobs in the project, jobs matching, the requested page of them)."""
    base = [J.c.project_id == project_id, J.c.deleted_at.is_(None)]
    total = conn.execute(sa.select(sa.func.count()).select_from(J).where(*base)).scalar_one()
    conds = base + [_filter_clause(f) for f in search.filters]
    count = conn.execute(sa.select(sa.func.count()).select_from(J).where(*conds)).scalar_one()
    if search.sort_by == "duration":
        # Duration of finished jobs; running ones sort by how long they have run so far.
        end = sa.func.coalesce(J.c.end_time, J.c.updated_at)
        sort_col: Any = sa.case((J.c.start_time.is_(None), 0), else_=end - J.c.start_time)
    else:
        sort_col = SORT_COLUMNS[search.sort_by]
    order = sort_col.asc() if search.order == "asc" else sort_col.desc()
    tie = J.c.seq.asc() if search.order == "asc" else J.c.seq.desc()
    q = (sa.select(J).where(*conds).order_by(order, tie)
         .offset(search.offset * search.limit).limit(search.limit))
    return int(total), int(count), list(conn.execute(q))


def _filter_clause(f: specs.Filter) -> Any:
    col = {"name": J.c.name, "phase": J.c.phase, "secondary_phase": J.c.secondary_phase,
           "create_time": J.c.create_time, "description": J.c.description}[f.key]
    values: list[Any] = [int(v) for v in f.value] if f.key == "create_time" else list(f.value)
    if f.operator == "in":
        return col.in_(values)
    if f.operator == "not":
        return col.not_in(values)
    if f.operator == "between":
        lo, hi = values
        return col.between(lo, hi)
    # like: a substring match on any of the values, with the user's % and _ taken literally
    return sa.or_(*[col.like(f"%{_escape_like(v)}%", escape="\\") for v in values])


def _escape_like(v: str) -> str:
    return v.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


# --- events -------------------------------------------------------------------------------


def add_event(conn: sa.Connection, job_id: str, now: int, message: str, *,
              level: str = "Info", source: str = "Job") -> None:
    _RUN_EVENT.run(conn, {"job_id": job_id, "time": now, "level": level, "source": source,
                          "message": message})


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

    def add(self, job_id: str, now: int, message: str, *, level: str = "Info",
            source: str = "Job") -> None:
        self.jobs.add(job_id)
        self.rows.append({"job_id": job_id, "time": now, "level": level, "source": source,
                          "message": message})

    def write(self, conn: sa.Connection) -> None:
        if self.rows:
            _RUN_EVENT.run_many(conn, self.rows)
            self.rows = []


def list_events(conn: sa.Connection, job_id: str, *, offset: int, limit: int, order: str,
                level: str | None = None, pattern: str | None = None,
                start_time: int | None = None,
                end_time: int | None = None) -> tuple[int, list[sa.Row[Any]]]:
    conds = [E.c.job_id == job_id]
    if level:
        conds.append(E.c.level == level)
    if pattern:
        conds.append(E.c.message.like(f"%{_escape_like(pattern)}%", escape="\\"))
    if start_time is not None and end_time is not None:
        conds.append(E.c.time.between(start_time, end_time))
    total = conn.execute(sa.select(sa.func.count()).select_from(E).where(*conds)).scalar_one()
    key = E.c.id.asc() if order == "asc" else E.c.id.desc()
    rows = conn.execute(sa.select(E).where(*conds).order_by(key).offset(offset).limit(limit))
    return int(total), list(rows)


# --- attempts (running records) and tasks ------------------------------------------------


def open_attempt(conn: sa.Connection, job_id: str, seq: int, now: int,
                 start_type: jobs_mod.StartType) -> None:
    _RUN_OPEN_ATTEMPT.run(conn, {"job_id": job_id, "seq": seq, "start_at": now,
                                 "start_type": start_type.value})


def close_attempt(conn: sa.Connection, job_id: str, seq: int, *, now: int, end_reason: str,
                  related_task: str | None = None,
                  end_recover: jobs_mod.EndRecover | None = None) -> None:
    _RUN_CLOSE_ATTEMPT.run(conn, {
        "end_at": now, "end_reason": end_reason, "end_related_task": related_task,
        "end_recover": end_recover.value if end_recover else None,
        "k_job": job_id, "k_seq": seq})


def attempts_of(conn: sa.Connection, job_id: str) -> list[Any]:
    return _RUN_ATTEMPTS.rows(conn, {"k_job": job_id})


def latest_attempt(conn: sa.Connection, job_id: str) -> int:
    return int(_RUN_LATEST_ATTEMPT.scalar(conn, {"k_job": job_id}) or 0)


def latest_attempts(conn: sa.Connection, job_ids: Sequence[str]) -> dict[str, int]:
    """latest_attempt of several jobs (one query); jobs that never started are left out."""
    return {r.job_id: int(r.seq) for r in conn.execute(_Q_LATEST_ATTEMPTS,
                                                        {"k_jobs": list(job_ids)})}


def set_finalized(conn: sa.Connection, job_ids: Sequence[str], now: int) -> None:
    """The storage component is done with these ended jobs."""
    if job_ids:
        conn.execute(_U_FINALIZED, {"finalized_at": now, "k_jobs": list(job_ids)})


def insert_tasks(conn: sa.Connection, rows: Sequence[Mapping[str, Any]]) -> None:
    _RUN_INSERT_TASK.run_many(conn, rows)


def update_task(conn: sa.Connection, job_id: str, attempt: int, name: str, *,
                expect: Iterable[jobs_mod.TaskState] | None = None, **fields: Any) -> bool:
    params = {**fields, "k_job": job_id, "k_attempt": attempt, "k_name": name}
    if expect is None:
        return _RUN_TASK_UPDATE.run(conn, params) == 1
    states = frozenset(s.value for s in expect)
    stmt = _RUN_TASK_IN.get(states)
    if stmt is None:
        stmt = _RUN_TASK_IN[states] = _P(_U_TASK.where(_among(T.c.state, sorted(states))))
    return stmt.run(conn, params) == 1


def tasks_of(conn: sa.Connection, job_id: str, attempt: int | None = None) -> list[Any]:
    if attempt is None:
        attempt = latest_attempt(conn, job_id)
    return _RUN_TASKS.rows(conn, {"k_job": job_id, "k_attempt": attempt})


def delete_tasks(conn: sa.Connection, job_id: str, attempt: int) -> None:
    """Remove an attempt's task rows (one that never ran and never will)."""
    conn.execute(_D_TASKS, {"k_job": job_id, "k_attempt": attempt})


def live_tasks(conn: sa.Connection) -> list[Any]:
    """Tasks that may have a process: launching or running, with their job's phase."""
    return _RUN_LIVE_TASKS.rows(conn)


# --- metrics ------------------------------------------------------------------------------


def add_metrics(conn: sa.Connection, rows: Sequence[Mapping[str, Any]]) -> None:
    if rows:
        conn.execute(M.insert(), [dict(r) for r in rows])


def metrics_of(conn: sa.Connection, job_id: str, attempt: int, task: str,
               limit: int = 1440) -> list[sa.Row[Any]]:
    q = (sa.select(M).where(M.c.job_id == job_id, M.c.attempt == attempt, M.c.task == task)
         .order_by(M.c.time.desc()).limit(limit))
    return list(reversed(list(conn.execute(q))))


def running_tasks(conn: sa.Connection) -> list[sa.Row[Any]]:
    """Running tasks with a handle, with what their job was given (for sampling)."""
    q = (sa.select(T.c.job_id, T.c.attempt, T.c.name, T.c.handle, T.c.gpu_ids, J.c.cpu,
                   J.c.memory_mb)
         .join(J, J.c.id == T.c.job_id)
         .where(T.c.state == jobs_mod.TaskState.RUNNING.value, T.c.handle.is_not(None)))
    return list(conn.execute(q))
