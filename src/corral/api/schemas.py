"""Response shapes of the API, so that /openapi.json describes every answer.

Field names follow the ModelArts v2 reference; corral's own additions are marked.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Out(BaseModel):
    model_config = ConfigDict(extra="allow")


class ErrorBody(BaseModel):
    error_code: str = Field(examples=["ModelArts.2775"])
    error_msg: str


class JobMetadataOut(Out):
    id: str
    name: str
    workspace_id: str = "0"
    description: str = ""
    create_time: int
    user_name: str = ""
    annotations: dict[str, str] = Field(default_factory=dict)


class TaskStatusOut(Out):
    task: str
    exit_code: int | None = None
    message: str | None = None


class RunningRecordOut(Out):
    start_at: int = Field(description="unix time in seconds, as the ModelArts reference has "
                          "it (corral's other times are milliseconds)")
    end_at: int | None = Field(default=None, description="unix time in seconds")
    start_type: str
    end_reason: str | None = None
    end_related_task: str | None = None
    end_recover: str | None = None
    failure_class: str | None = Field(
        default=None, description="corral: why it ended, when not by completing: user_exit, "
        "out_of_memory, launch_error, lost, node_lost, hang, preempted, timeout, stopped")


class QueueInfoOut(Out):
    pool_id: str
    priority: int
    jobs_ahead: int = Field(description="pending jobs before it in its pool (by priority, "
                            "then submission)")
    wait_code: str = Field(description=(
        "why it waits: queued (behind an older job of its priority), no_capacity (next to "
        "start; not enough free capacity in the pool), gang_does_not_fit (next to start; "
        "free capacity is on too few nodes for all its tasks at once), preempting (next to "
        "start; preempted jobs are stopping), behind_priority (a higher-priority job is next), "
        "quota_exceeded (its project's quota in the pool), no_node (no node of the pool can "
        "hold it)"))


class StatusOut(Out):
    phase: str
    secondary_phase: str
    duration: int = 0
    node_count_metrics: list[list[int]] = Field(default_factory=list)
    tasks: list[str] = Field(default_factory=list)
    start_time: int = 0
    task_statuses: list[TaskStatusOut] = Field(default_factory=list)
    running_records: list[RunningRecordOut] = Field(default_factory=list)
    reason: str | None = Field(default=None, description="corral: why the job waits or failed")
    failure_class: str | None = Field(
        default=None, description="corral: why it failed or was stopped (user_exit, "
        "out_of_memory, launch_error, lost, node_lost, hang, timeout, stopped)")
    restart_at: int | None = Field(
        default=None, description="corral: when a job restarting after a failure starts its "
        "next attempt (ms since the epoch); `reason` says after what")
    queue: QueueInfoOut | None = Field(
        default=None, description="corral: where a Pending job stands in its pool's queue")
    borrowed: bool | None = Field(
        default=None, description="corral: runs beyond its project's quota on idle capacity, "
        "and is the first to be preempted to give it back")
    preempting: bool | None = Field(
        default=None, description="corral: being preempted; it is requeued once stopped")


class CpuOut(Out):
    arch: str
    core_num: int | float = Field(description="an integer unless a flavor gives a fraction")


class GpuOut(Out):
    unit_num: int
    product_name: str = ""
    memory: str = ""


class NpuOut(Out):
    unit_num: str = Field(description="a string, as the ModelArts reference has it")
    product_name: str = ""
    memory: str = ""


class AcceleratorOut(Out):
    name: str
    unit_num: int
    product_name: str = ""
    memory: str = ""


class SizeOut(Out):
    size: int
    unit: str


class DiskOut(Out):
    size: int | str = Field(description="GB: a number in the flavors' list, a string in a "
                            "job's flavor_detail, as the reference has them. The room the "
                            "server's run folders' file system has for jobs (its size less "
                            "disk_free_floor_gb and disk_reserve_mb), shared by every task: "
                            "not a quota")
    unit: str = "GB"


class FlavorInfoOut(Out):
    max_num: int
    cpu: CpuOut
    gpu: GpuOut | None = None
    npu: NpuOut | None = None
    memory: SizeOut
    disk: DiskOut | None = None
    accelerators: list[AcceleratorOut] | None = Field(
        default=None, description="corral: accelerators other than GPUs per task, by name")


class BillingOut(Out):
    code: str
    unit_num: int


class FlavorDetailOut(Out):
    flavor_type: str
    billing: BillingOut
    flavor_info: FlavorInfoOut


class FlavorOut(FlavorDetailOut):
    flavor_id: str
    flavor_name: str
    max_num: int
    attributes: dict[str, str] = Field(default_factory=dict)


class ResourceOut(Out):
    policy: str = "regular"
    flavor_id: str
    flavor_name: str
    node_count: int
    pool_id: str | None = None
    flavor_detail: FlavorDetailOut


class SpecOut(Out):
    resource: ResourceOut
    log_export_path: dict[str, Any] | None = None
    schedule_policy: dict[str, Any] | None = None


class JobOut(Out):
    kind: str = "job"
    metadata: JobMetadataOut
    status: StatusOut
    algorithm: dict[str, Any]
    spec: SpecOut
    #: a job with tensorboard/enable: true, shown: `{tensorboard: {url, token}}`, its
    #: TensorBoard's page and what opens it for the caller (`url?token=...`)
    endpoints: dict[str, Any] | None = None


class SearchOut(Out):
    total: int
    count: int
    limit: int
    offset: int
    sort_by: str
    order: str
    group_by: str | None = None
    workspace_id: str = "0"
    ai_project: str = "default-ai-project"
    items: list[JobOut]
    #: corral: give it as `cursor` for the next page (None: this page is the last)
    next_cursor: str | None = None


class EventOut(Out):
    message: str
    level: str
    time: str
    source: str


class EventsOut(Out):
    total: int
    limit: int
    offset: int
    order: str
    start_time: str | None = None
    end_time: str | None = None
    events: list[EventOut]


class FlavorsOut(Out):
    total_count: int
    flavors: list[FlavorOut]


class EngineOut(Out):
    engine_id: str
    engine_name: str
    engine_version: str
    v1_compatible: bool = False
    run_user: str = ""
    image_info: dict[str, str] = Field(default_factory=dict)


class EnginesOut(Out):
    total: int
    items: list[EngineOut]


class LogPreviewOut(Out):
    content: str
    current_size: int
    full_size: int


class LogUrlOut(Out):
    obs_url: str = Field(description="a link to the task's log that opens without a "
                         "credential until it expires (log_url_seconds), served by corral")


class LogChunkOut(Out):
    content: str
    offset: int
    next_offset: int
    full_size: int
    attempt: int
    finished: bool = Field(description="the task has ended; no more will be written")


class MetricOut(Out):
    metric: str
    value: list[float]


class MetricsOut(Out):
    metrics: list[MetricOut]
    times: list[int] = Field(default_factory=list, description="corral: sample times (ms)")


class NodeOut(Out):
    name: str
    cpu: int
    memory_mb: int
    gpus: int
    accelerators: dict[str, int] = Field(default_factory=dict)


class NodeUsageOut(Out):
    name: str
    cpu: int = Field(description="its cores, as corral counts them")
    memory_mb: int
    gpus: int
    gpu_memory_mb: int = Field(description="its GPUs' memory together")
    times: list[int] = Field(description="when each sample was taken (ms since the epoch)")
    cpu_percent: list[float] = Field(description="of the whole node, by anyone")
    mem_mb: list[float] = Field(description="memory in use (total less available)")
    gpu_util: list[float] | None = Field(
        default=None, description="mean over its GPUs, percent; null: no GPU figures")
    gpu_mem_mb: list[float] | None = None


class NodeUsagesOut(Out):
    minutes: int
    nodes: list[NodeUsageOut]


class LeaderOut(Out):
    server: str = Field(description="the server that schedules: its name, pid and start")
    name: str = Field(description="its `server_name`")
    url: str | None = Field(default=None, description="where it serves the API")
    epoch: int = Field(description="raised at every change of leader (its fencing token)")
    since: int = Field(description="when it took the lease, ms since the epoch")
    this_server: bool = Field(description="the server that answered is the leader")


class InfoOut(Out):
    version: str
    default_project_id: str
    database: str
    home: str
    containment: str = Field(description="corral: how each task's processes are held "
                                         "together (cgroups, or the keeper's subreaper)")
    nodes: list[NodeOut]
    server: str = Field(default="", description="the server that answered (name:pid:start)")
    leader: LeaderOut | None = Field(
        default=None, description="the server that schedules; null while none holds the "
                                  "lease (between a leader's death and its successor)")


# --- versions, training metrics and models (corral additions) ------------------------------


class VersionOut(Out):
    version_id: str = Field(description="the id of the training job that is this version")
    version_name: str = Field(examples=["V0002"])
    pre_version_id: str | None = None
    pre_version_name: str | None = None
    resume: bool = False
    create_time: int
    phase: str
    secondary_phase: str
    duration: int
    final_metrics: dict[str, float] = Field(default_factory=dict)
    code_hash: str | None = None
    git_commit: str | None = None
    parameters: dict[str, str] = Field(default_factory=dict)
    inputs: dict[str, str] = Field(default_factory=dict)
    outputs: dict[str, str] = Field(default_factory=dict)
    flavor_id: str
    node_count: int


class VersionsOut(Out):
    job_id: str = Field(description="the family: the id of the job's first version")
    job_name: str
    job_desc: str = ""
    version_count: int
    versions: list[VersionOut]


class TrainingSeriesOut(Out):
    metric: str
    value: list[float]
    steps: list[int | None]
    times: list[int]
    tasks: list[str]


class TrainingMetricsOut(Out):
    metrics: list[TrainingSeriesOut]
    final_metrics: dict[str, float]


class DatasetReadOut(Out):
    """A dataset version the model version's job read (its lineage)."""

    channel: str
    dataset_id: str | None = None
    dataset_name: str | None = None
    version_id: str | None = None
    version_name: str | None = None
    content_hash: str | None = Field(default=None, description="null: the version is gone")
    number_of_samples: int | None = None


class ModelVersionOut(Out):
    model_name: str
    version: int
    aliases: list[str] = Field(default_factory=list)
    create_time: int
    location: str
    size_bytes: int
    file_count: int
    source_job_id: str
    source_job_name: str
    source_version: str | None = None
    source_channel: str
    source_phase: str
    metrics: dict[str, float] = Field(default_factory=dict)
    parameters: dict[str, str] = Field(default_factory=dict)
    inputs: dict[str, str] = Field(default_factory=dict)
    code_hash: str | None = None
    git_commit: str | None = None
    datasets: list[DatasetReadOut] = Field(
        default_factory=list, description="the dataset versions its job read: job -> "
        "dataset version -> model version")


class ModelOut(Out):
    id: str
    name: str
    create_time: int
    update_time: int
    latest_version: int | None = None
    version_count: int
    aliases: dict[str, int] = Field(default_factory=dict)
    versions: list[ModelVersionOut] | None = None


class ModelsOut(Out):
    total: int
    models: list[ModelOut]
