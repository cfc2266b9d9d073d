"""The rows the store hands out: `values.value` dataclasses (frozen to the type checker),
one per table or query shape.

Everything above the store reads these, never SQLAlchemy's rows: a typo in a column name
is a type error, not an AttributeError at run time, and a test's fake job is built with
the same class (`dataclasses.replace` makes a changed copy). Field names are the column
names; times are milliseconds since the epoch; phases and states are the stored strings
(the enums in `corral.domain.jobs` are `StrEnum`s, so they compare equal).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import Any, Self

import sqlalchemy as sa

from corral.domain import values


class FromRow:
    """`of`: a dataclass from a result row whose columns carry its field names."""

    __slots__ = ()

    @classmethod
    def of(cls, r: Any) -> Self:  # (an sa.Row of any column types)
        mapping: Mapping[str, Any] = r._mapping
        return cls(**mapping)

    @classmethod
    def all(cls, result: sa.Result[Any]) -> list[Self]:
        # The names once, not a mapping per row: a reconciler pass reads tens of thousands.
        names = tuple(result.keys())
        make: Any = cls
        if names == _field_names(make)[:len(names)]:  # the columns in the fields' order
            return [make(*r) for r in result]
        return [cls(**dict(zip(names, r, strict=True))) for r in result]


@functools.cache
def _field_names(cls: Any) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


@values.value
class Job(FromRow):
    """A training job (the `jobs` table)."""

    id: str
    seq: int
    project_id: str
    name: str
    description: str
    kind: str
    user_name: str
    phase: str
    secondary_phase: str
    spec: str  #: the JobCreate body as JSON (repo.job_spec parses it)
    flavor_id: str
    node_count: int
    cpu: float  #: per task, as are memory_mb, gpu and accelerators
    memory_mb: int
    gpu: int
    retry_limit: int
    create_time: int
    updated_at: int
    start_time: int | None
    end_time: int | None
    failure_class: str | None
    failure_message: str | None
    wait_reason: str | None
    terminate_requested_at: int | None
    deleted_at: int | None
    master_port: int | None
    pool_id: str
    priority: int
    preemptible: bool
    spread: bool
    gpu_type: str
    borrowed: bool
    wait_code: str | None
    preempt_requested_at: int | None
    family_id: str | None
    version: int | None
    staging: str | None
    finalized_at: int | None
    accelerators: str | None  #: JSON {"npu": 2}, or None
    owner_kind: str | None  #: the job kind whose object owns the job (kinds/), if any
    owner_id: str | None
    owner_role: str | None  #: what the job is to its owner ("round-3/train")
    #: when the restart after a failed attempt may start (its backoff), while one is due
    restart_at: int | None = None
    stop_cause: str | None = None  #: 'hang' or 'timeout' while corral stops its tasks
    excluded_nodes: str | None = None  #: JSON list of the nodes it is kept off
    node_name: str = ""  #: the one node it runs on ("": any of its pool)


@values.value
class QueuedJob(FromRow):
    """What the scheduler reads of a job waiting to start (a long queue is read often:
    only what placement needs, no spec)."""

    id: str
    phase: str
    cpu: float
    memory_mb: int
    gpu: int
    accelerators: str | None
    node_count: int
    wait_reason: str | None
    wait_code: str | None
    project_id: str
    pool_id: str
    priority: int
    seq: int
    spread: bool
    gpu_type: str
    retry_limit: int
    excluded_nodes: str | None = None  #: JSON list of the nodes it is kept off
    node_name: str = ""  #: the one node it runs on ("": any of its pool)


@values.value
class Task(FromRow):
    """One task (process) of one attempt of a job (the `tasks` table)."""

    job_id: str
    attempt: int
    name: str  #: worker-0, worker-1, ...
    rank: int
    node: str
    state: str  #: a domain.jobs.TaskState
    launch_id: str
    gpu_ids: str  #: "0,1", or "" for none
    accel_ids: str | None  #: JSON {"npu": [0, 1]}, or None
    handle: str | None  #: executors.base.Handle as JSON, once launched
    exit_code: int | None
    message: str | None
    launched_at: int | None
    ended_at: int | None
    kill_sent_at: int | None


@values.value
class LiveTask(Task):
    """A task that may have a process, with its job's phase."""

    job_phase: str


@values.value
class Attempt(FromRow):
    """A running record: one start of a job's tasks (the `attempts` table)."""

    job_id: str
    seq: int
    start_at: int
    end_at: int | None
    start_type: str
    end_reason: str | None
    end_related_task: str | None
    end_recover: str | None
    failure_class: str | None = None  #: why it ended, when not by completing


@values.value
class Event(FromRow):
    """A job event (the `job_events` table)."""

    id: int
    job_id: str
    time: int
    level: str
    source: str
    message: str


@values.value
class DeletedJob(FromRow):
    id: str
    phase: str


@values.value
class PendingJob(FromRow):
    """A waiting job as the queue view shows it."""

    id: str
    name: str
    project_id: str
    pool_id: str
    priority: int
    node_count: int
    flavor_id: str
    create_time: int
    phase: str
    wait_code: str | None
    wait_reason: str | None


@values.value
class Held(FromRow):
    """What the jobs holding resources hold, summed per project, pool and accelerators."""

    project_id: str
    pool_id: str
    accelerators: str | None
    cpu: float
    memory_mb: int
    gpu: int
    tasks: int


@values.value
class Quota(FromRow):
    """A project's quota in one pool (the `quotas` table)."""

    project_id: str
    pool_id: str
    cpu: float | None
    memory_mb: int | None
    gpu: int | None
    borrowing: bool
    weight: float
    updated_at: int
    accelerators: str | None


@values.value
class Usage(FromRow):
    """A project's recent share of a pool, for fair share (the `project_usage` table)."""

    project_id: str
    pool_id: str
    share: float
    updated_at: int


@values.value
class TaskMetric(FromRow):
    """A resource sample of a task (the `task_metrics` table)."""

    id: int
    job_id: str
    attempt: int
    task: str
    time: int
    cpu_usage: float
    mem_usage: float
    mem_mb: float
    gpu_util: float
    gpu_mem_usage: float


@values.value
class NodeSample(FromRow):
    """A node's use at one time, machine-wide (the `node_samples` table)."""

    id: int
    node: str
    time: int
    cpu_percent: float
    mem_mb: float
    gpu_util: float | None
    gpu_mem_mb: float | None


@values.value
class RunningTask(FromRow):
    """A running task with what its job was given (what resource sampling needs)."""

    job_id: str
    attempt: int
    name: str
    handle: str
    gpu_ids: str
    cpu: float
    memory_mb: int


# --- identity (store/identity_repo.py) ----------------------------------------------------


@values.value
class Project(FromRow):
    """A project (the `projects` table): what jobs, quotas, keys and models belong to."""

    id: str  #: 32 hex characters, as on ModelArts
    name: str
    created_at: int


@values.value
class User(FromRow):
    """A user (the `users` table)."""

    id: str
    name: str
    is_admin: bool  #: a platform admin: manages projects and users, admin in every project
    created_at: int
    disabled_at: int | None  #: a disabled user's credentials all stop working


@values.value
class AccessKey(FromRow):
    """An access key pair (the `access_keys` table)."""

    access_key: str
    user_id: str
    project_id: str  #: the one project the key signs requests for
    secret_sealed: str  #: the secret key, encrypted with the server key
    description: str
    created_at: int
    revoked_at: int | None


@values.value
class LiveKey(FromRow):
    """What verifying a signature needs of an access key that works (not revoked, its user
    not disabled)."""

    access_key: str
    secret_sealed: str  #: the secret key, encrypted with the server key
    project_id: str
    user_id: str


@values.value
class ListedKey(FromRow):
    """An access key as listings show it: never its secret, with its user's name."""

    access_key: str
    project_id: str
    description: str
    created_at: int
    revoked_at: int | None
    user_name: str


@values.value
class LiveToken(FromRow):
    """A bearer token that works (neither revoked nor expired)."""

    id: str  #: the token's public id (the token itself is never stored)
    user_id: str
    project_id: str | None  #: a token made with an access key reaches that project only
    expires_at: int | None


@values.value
class ListedToken(FromRow):
    """A bearer token as listings show it: never its hash."""

    id: str  #: the token's public id
    description: str
    project_id: str | None  #: a token made with an access key reaches that project only
    created_at: int
    expires_at: int | None
    revoked_at: int | None


# --- versions and training metrics (store/version_repo.py) -------------------------------


@values.value
class Version(FromRow):
    """Which version of which family a job is (the `job_versions` table)."""

    job_id: str
    family_id: str  #: the id of the family's first version
    number: int  #: 1 for V0001
    parent_job_id: str | None  #: the version it was made from; None for a family's first
    parent_number: int | None
    resume: bool  #: it starts from its parent's outputs
    output_bases: str  #: JSON: output channel -> the folder the family's versions write under
    code_hash: str | None  #: the code its last attempt ran, fixed when the job has ended
    git_commit: str | None
    code_attempt: int | None  #: the attempt code_hash and git_commit were read from
    final_metrics: str | None  #: JSON: metric -> last value, fixed when the job has ended
    created_at: int


@values.value
class MetricPoint(FromRow):
    """One value of a training metric a job reported (the `training_metrics` table)."""

    id: int
    job_id: str
    attempt: int
    task: str  #: worker-0, worker-1, ...
    step: int | None  #: the training step, when the job gave one
    name: str
    value: float
    time: int


# --- the model registry (store/model_repo.py) --------------------------------------------


@values.value
class Model(FromRow):
    """A registered model (the `models` table)."""

    id: str
    project_id: str
    name: str
    next_version: int  #: the number its next version gets (numbers are never given twice)
    created_at: int
    updated_at: int


@values.value
class ModelVersion(FromRow):
    """A numbered version of a model: files a job wrote (the `model_versions` table)."""

    model_id: str
    version: int
    created_at: int
    location: str  #: where the files are: a local folder or an s3:// URL in the model store
    size_bytes: int
    file_count: int
    source_job_id: str  #: the job whose output channel the files were copied from
    source_job_name: str
    source_version: int | None  #: that job's number in its family
    source_channel: str  #: the output channel
    source_phase: str  #: the phase that job ended in
    metrics: str  #: JSON: the job's final metrics
    parameters: str  #: JSON: the job's parameters, name -> value
    inputs: str  #: JSON: the job's input channels, name -> URL
    code_hash: str | None
    git_commit: str | None
    datasets: str  #: JSON: the dataset versions the job read (its lineage)


@values.value
class RegisteredVersion(ModelVersion):
    """A model version with the name of its model (what a job was registered as)."""

    model_name: str


@values.value
class EndedJob(FromRow):
    """An ended job as retention sees it."""

    id: str
    name: str
    project_id: str
    end_time: int


# --- incremental learning (store/dataset_repo.py, store/loop_repo.py) -------------------


@values.value
class AliasMove(FromRow):
    """A move of a model alias (the `model_alias_history` table)."""

    id: int
    model_id: str
    alias: str
    from_version: int | None  #: None: the alias named nothing before
    to_version: int | None  #: None: the alias was removed
    time: int
    user_name: str
    reason: str


# --- pipelines (store/pipeline_repo.py) ------------------------------------------------------
