"""The rows of the job kinds' tables (store/kind_tables.py), as `rows` holds the jobs':
`values.value` dataclasses, field names the column names, times in milliseconds."""

from __future__ import annotations

from corral.domain import values
from corral.store import rows


@values.value
class KindEvent(rows.FromRow):
    """An event of a job kind's object (the `kind_events` table)."""

    id: int
    kind: str  #: the job kind ("incremental_learning", "pipeline", "notebook")
    object_id: str
    time: int
    level: str
    message: str


@values.value
class Dataset(rows.FromRow):
    """A dataset: an index file of samples, one a line (the `datasets` table)."""

    id: str
    project_id: str
    name: str
    description: str
    url: str  #: the index file: a local path or an s3:// URL
    format: str  #: txt or csv (a csv's header is not a sample)
    number_of_samples: int
    stamp: str | None  #: the file's size and mtime (or ETag) when its samples were counted
    checked_at: int | None
    user_name: str
    created_at: int
    updated_at: int


@values.value
class DatasetVersion(rows.FromRow):
    """A dataset's samples frozen as they were (the `dataset_versions` table)."""

    id: str
    dataset_id: str
    project_id: str
    number: int  #: 1, 2, ... in its dataset
    description: str
    location: str  #: the folder of its frozen files (local, or s3://)
    format: str
    number_of_samples: int
    size_bytes: int
    content_hash: str  #: sha256 of its files' paths, sizes and hashes
    files: str  #: JSON: [{path, size, sha256}]
    user_name: str
    created_at: int
    deleted_at: int | None = None  #: deleted on its own: its files are gone


@values.value
class Loop(rows.FromRow):
    """An incremental-learning loop (the `il_loops` table)."""

    id: str
    project_id: str
    name: str
    description: str
    user_name: str
    spec: str  #: the LoopSpec as JSON
    state: str  #: a domain.incremental.states.LoopState
    dataset_id: str
    initial_model: str
    initial_version: int
    eval_model: str | None
    eval_version: int | None
    rounds: int  #: the number of the latest round started
    failed_rounds: int  #: in a row
    not_before: int | None
    next_check_at: int
    trigger_requested_at: int | None
    trigger_requested_by: str | None
    split_upto: int
    train_pending: str  #: JSON ranges of line numbers
    eval_versions: str  #: JSON ranges of line numbers, oldest first
    deploys: int
    services: int
    hard_examples_read: int
    message: str | None
    created_at: int
    updated_at: int


@values.value
class Round(rows.FromRow):
    """One round of a loop (the `il_rounds` table)."""

    loop_id: str
    number: int
    state: str  #: a domain.incremental.states.RoundState
    started_at: int
    ended_at: int | None
    trigger: str  #: JSON
    train_ranges: str  #: JSON
    train_samples: int
    eval_samples: int
    eval_hash: str
    base_model: str
    base_version: int
    current_model: str | None
    current_version: int | None
    train_job_id: str | None
    eval_job_id: str | None
    new_version: int | None
    metrics_new: str | None  #: JSON
    metrics_current: str | None  #: JSON
    decision: str | None  #: promote or reject
    rule: str | None
    deploy_seq: int | None
    message: str | None


@values.value
class Deploy(rows.FromRow):
    """A model written for a loop's service, and its acknowledgement (`il_deploys`)."""

    loop_id: str
    seq: int
    round: int | None
    model_name: str
    version: int
    token: str  #: model_config.json's model_update_time
    moves_alias: bool
    reason: str
    user_name: str
    state: str  #: a domain.incremental.states.DeployState
    service_role: str | None
    created_at: int
    written_at: int | None
    deadline: int | None
    ended_at: int | None
    message: str | None


@values.value
class Pipeline(rows.FromRow):
    """A pipeline (the `pipelines` table); its state is its current attempt's."""

    id: str
    project_id: str
    name: str
    description: str
    user_name: str
    spec: str  #: the PipelineCreate as accepted, JSON
    output_base: str  #: the folder its runs' output folders go under
    attempt: int  #: its current attempt
    model_name: str | None  #: the model registered when it succeeded
    model_version: int | None
    created_at: int
    updated_at: int
    deleted_at: int | None  #: deleted while it ran: purged once its jobs have ended


@values.value
class PipelineAttempt(rows.FromRow):
    """A run of a pipeline: its first, or a rerun (the `pipeline_attempts` table)."""

    pipeline_id: str
    number: int
    state: str  #: domain.pipelines.status.Status
    mode: str  #: initial, from_failed, from_task or all
    from_task: str | None
    parameters: str  #: JSON: the pipeline's parameters for this attempt
    overrides: str  #: JSON: task -> parameter -> value
    progress: int  #: percent of its runs ended
    message: str | None
    created_at: int
    started_at: int | None
    ended_at: int | None
    stop_requested_at: int | None
    timed_out_at: int | None


@values.value
class PipelineRun(rows.FromRow):
    """A task's run (an item's) in an attempt (the `pipeline_runs` table)."""

    pipeline_id: str
    attempt: int
    key: str  #: `train`, or `train[1]`
    project_id: str
    task: str
    item: int | None
    state: str  #: domain.pipelines.status.TaskState
    origin: str  #: run, reused or cached
    job_id: str | None
    source: str | None  #: "<pipeline id>/<attempt>/<key>" of a reused or cached run
    cache_key: str | None
    parameters: str | None  #: JSON, as resolved at submit
    inputs: str | None
    outputs: str | None
    metrics: str | None  #: JSON: its final metrics, once read
    message: str | None
    submitted_at: int | None
    ended_at: int | None
    outputs_removed_at: int | None
    updated_at: int


@values.value
class Notebook(rows.FromRow):
    """A notebook (the `notebooks` table; kinds/notebooks/)."""

    id: str
    project_id: str
    name: str
    description: str
    user_name: str
    flavor_id: str
    image_id: str  #: the engine that runs its JupyterLab
    pool_id: str | None
    workspace: str  #: the folder kept from one session to the next
    volume: str  #: JSON: the volume as asked for
    state: str  #: a domain.notebooks.State
    session: int  #: its latest session's number (its job's role is `session-<n>`)
    lease_type: str
    lease_ms: int
    lease_updated_at: int | None
    started_at: int | None
    ready_at: int | None
    stops_at: int | None
    stop_requested_at: int | None
    stop_reason: str | None
    port: int | None
    jupyter_token: str | None
    access_token: str | None
    cookie_secret: str | None
    last_request_at: int | None
    last_active_at: int | None
    checked_at: int | None
    created_at: int
    updated_at: int


@values.value
class Search(rows.FromRow):
    """A hyperparameter search (the `searches` table; kinds/search/): the training job
    `job_id` is the search."""

    job_id: str
    project_id: str
    policy: str  #: JSON: the job's policies.auto_search
    model_name: str | None
    model_channel: str | None
    model_version: int | None
    best_trial: int | None
    started_at: int | None
    ended_at: int | None
    created_at: int
    updated_at: int


@values.value
class SearchTrial(rows.FromRow):
    """A trial of a search (the `search_trials` table)."""

    search_id: str
    number: int
    job_id: str
    state: str  #: domain.search.trials.State
    stop_cause: str | None
    reason: str | None
    params: str  #: JSON: name -> value
    system_attrs: str  #: JSON
    intermediate: str  #: JSON: step -> value
    reward: float | None
    started_at: int
    ended_at: int | None
    updated_at: int
