"""corral's one settings object: `CORRAL_*` environment variables over a TOML file.

Built once in `main()` (server, CLI) and passed down; nothing else reads the environment.
The TOML file is `$CORRAL_HOME/config.toml` unless `CORRAL_CONFIG` names another.
"""

from __future__ import annotations

import os
import pathlib
import sys
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from corral.domain import errors, leadership, resources


class EngineConfig(BaseModel):
    """A named Python interpreter (or a virtualenv's) that runs boot files."""

    engine_id: str
    engine_name: str = "Python"
    engine_version: str = ""
    #: the interpreter, or a virtualenv directory (its bin/python is used)
    python: str

    @field_validator("python")
    @classmethod
    def _venv(cls, v: str) -> str:
        p = pathlib.Path(v).expanduser()
        return str(p / "bin" / "python") if p.is_dir() else str(p)


def _accel_names(value: dict[str, Any]) -> dict[str, Any]:
    for name in value:
        try:
            resources.check_accel_name(name)
        except errors.BadParameter as exc:
            raise ValueError(exc.message) from None
    return value


class FlavorConfig(BaseModel):
    flavor_id: str
    flavor_name: str = ""
    cpu: float = Field(gt=0)
    memory_gb: int = Field(ge=1)
    gpu: int = Field(default=0, ge=0)
    max_num: int = Field(default=1, ge=1)
    #: accelerators per task by name, e.g. {npu = 2}
    accelerators: dict[str, Annotated[int, Field(ge=1)]] = Field(default_factory=dict)

    _names = field_validator("accelerators")(_accel_names)


class AcceleratorConfig(BaseModel):
    """A kind of accelerator other than GPUs: how many this machine has, the variable
    that pins a task to the devices it was given, and what flavors show of it."""

    model_config = ConfigDict(extra="forbid")

    #: devices on this machine (the local node), numbered 0 .. count-1; 0 on a server
    #: whose nodes come from Ray (they say their own)
    count: int = Field(default=0, ge=0)
    #: default ASCEND_RT_VISIBLE_DEVICES for npu, else <NAME>_VISIBLE_DEVICES
    visible_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    product_name: str = ""
    memory: str = ""  #: each device's memory as flavors show it, e.g. "64GB"


class StorageConfig(BaseModel):
    """Where jobs may read code and inputs and write outputs and exported logs.

    Every project may use `$CORRAL_HOME/projects/<project id>/` and the shared `roots`;
    `projects` adds roots for one project (by its name or id). Nothing else under
    CORRAL_HOME is ever allowed. A default project with no roots of its own is open (any
    path outside CORRAL_HOME: the single-user default) unless `open_default_project` is
    false.
    """

    roots: list[str] = Field(default_factory=list)
    projects: dict[str, list[str]] = Field(default_factory=dict)
    open_default_project: bool = True


class RetentionConfig(BaseModel):
    """How long ended jobs are kept; 0 keeps them for ever (the default).

    `logs_days`: an ended job's run folder (its logs, code snapshot, metric files) goes
    after so many days, its record stays; `records_days`: its record goes too (the job,
    its events, metrics and running records); `records_keep`: a project keeps at most so
    many ended jobs, the newest. A job that registered a model keeps its record.
    """

    model_config = ConfigDict(extra="forbid")

    logs_days: float = Field(default=0, ge=0)
    records_days: float = Field(default=0, ge=0)
    records_keep: int = Field(default=0, ge=0)


#: variables of the server's environment that never reach a job (prefixes), besides CORRAL_*
JOB_ENV_DENY = ("AWS_", "HUAWEICLOUD_", "HWCLOUD_", "OBS_", "S3_", "PGPASSWORD", "PGPASSFILE",
                "GOOGLE_APPLICATION_CREDENTIALS", "AZURE_")


#: what can run a pool's jobs: this machine's processes, or a Ray cluster's nodes
EXECUTORS = ("local", "ray")
#: the executor key of this machine (a Ray cluster's is "ray:<address>")
LOCAL = "local"


class PoolConfig(BaseModel):
    """A named group of nodes that jobs ask for with spec.resource.pool_id."""

    pool_id: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    #: node names, or shell-style patterns ("gpu-*"); a node belongs to the first pool of
    #: its executor that names it, else to the default pool when that runs on the same
    #: executor, else to the first pool there that names no nodes
    nodes: list[str] = Field(default_factory=list)
    description: str = ""
    #: what runs the pool's jobs: "local" (this machine) or "ray" (the cluster at
    #: `address`); unset: whatever runs the default pool
    executor: str | None = None
    #: the Ray cluster of an executor "ray" pool: "auto", "HOST:PORT" or "ray://HOST:PORT"
    #: (an address alone means executor "ray")
    address: str | None = None

    @field_validator("executor")
    @classmethod
    def _known_executor(cls, v: str | None) -> str | None:
        if v is not None and v not in EXECUTORS:
            raise ValueError(f"unknown executor '{v}'; use one of: {', '.join(EXECUTORS)}")
        return v

    @model_validator(mode="after")
    def _address_fits(self) -> PoolConfig:
        if self.address is not None and not self.address.strip():
            raise ValueError(f"pool '{self.pool_id}': address is empty")
        if self.executor == LOCAL and self.address:
            raise ValueError(f"pool '{self.pool_id}': executor 'local' runs on this machine "
                             f"and takes no address (got '{self.address}')")
        if self.executor == "ray" and not self.address:
            raise ValueError(f"pool '{self.pool_id}': executor 'ray' needs the cluster's "
                             "address: auto, HOST:PORT or ray://HOST:PORT")
        return self

    @property
    def executor_key(self) -> str | None:
        """LOCAL, "ray:<address>", or None when the pool names no executor."""
        if self.address:
            return f"ray:{self.address}"
        return self.executor


class S3Config(BaseModel):
    """An S3-compatible object store: where `s3://` (and `obs://`) URLs of a project go.

    Credentials live here, in the server's configuration, never in a job body.
    """

    endpoint_url: str | None = None
    access_key: str | None = None
    secret_key: str | None = None
    session_token: str | None = None
    region: str = "us-east-1"
    #: seconds to wait for a connection before an attempt counts as failed
    connect_timeout: float = 5.0


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CORRAL_", extra="ignore")

    home: pathlib.Path = Field(default_factory=lambda: pathlib.Path.home() / ".corral")
    config: pathlib.Path | None = None
    database_url: str | None = None
    host: str = "127.0.0.1"
    port: int = 8765
    url: str = "http://127.0.0.1:8765"
    #: seconds between SIGTERM and SIGKILL when a job is stopped
    grace_period: float = 10.0
    #: seconds a running job may be silent (no log, no CPU or GPU use) before it is judged
    #: hung, for jobs that set no `spec.fault_tolerance.hang_timeout` (0: never)
    hang_timeout: int = Field(default=1800, ge=0, le=604800)
    #: seconds between reconciler passes when nothing wakes it earlier
    tick_interval: float = 1.0
    #: seconds between resource samples of running tasks
    metrics_interval: float = 5.0
    #: seconds a verified credential is remembered (0: look every request up). Revoking
    #: through this server takes effect at once; a change made to the database behind its
    #: back (another process) takes up to this long
    auth_cache_seconds: float = Field(default=5.0, ge=0)
    #: the log preview returns at most this many bytes from the end of a log
    log_preview_bytes: int = 5 * 1024 * 1024
    #: seconds a log's signed download link (`.../logs/url`) opens for
    log_url_seconds: int = Field(default=3600, ge=60, le=7 * 24 * 3600)
    #: flavors replace the detected defaults when given
    flavors: list[FlavorConfig] = Field(default_factory=list)
    #: engines in addition to the default one (the server's own Python)
    engines: list[EngineConfig] = Field(default_factory=list)
    default_flavor: str = "corral.cpu.1u"
    #: accelerators other than GPUs by name: a count for this machine ({npu = 8}), or a
    #: table (count, visible_env, product_name, memory)
    accelerators: dict[str, AcceleratorConfig] = Field(default_factory=dict)
    #: resource pools; nodes no pool names form the default pool
    pools: list[PoolConfig] = Field(default_factory=list)
    default_pool: str = Field(default="default", pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    #: seconds over which fair share forgets a project's usage (the mean's time constant)
    fair_share_window: float = Field(default=3600.0, gt=0)
    #: GiB that must stay free on the disks of CORRAL_HOME and the run directories; below
    #: it no job starts (they wait, saying why) so that running jobs' logs cannot take the
    #: database's last bytes (0: no floor)
    disk_free_floor_gb: float = Field(default=2.0, ge=0)
    #: MB kept in a reserve file in CORRAL_HOME while the disk is above that floor, and
    #: released below it, so that the database can still write when jobs fill the disk
    #: (0: none)
    disk_reserve_mb: int = Field(default=64, ge=0)
    #: override detected capacity (useful to share a machine with other work)
    cpus: int | None = None
    memory_gb: int | None = None
    #: the key secret keys are encrypted with (Fernet); else read from `server_key_file`
    server_key: SecretStr | None = None
    #: default `$CORRAL_HOME/server.key`, created (mode 0600) on first start
    server_key_file: pathlib.Path | None = None
    storage: StorageConfig = Field(default_factory=StorageConfig)
    #: how long ended jobs and their logs are kept (every project without its own)
    retention: RetentionConfig = Field(default_factory=RetentionConfig)
    #: a project's own retention, by the project's name or id
    project_retention: dict[str, RetentionConfig] = Field(default_factory=dict)
    #: seconds between the passes that apply retention
    retention_interval: float = Field(default=3600.0, gt=0)
    #: days an environment built for jobs' requirements is kept after its last use by a
    #: job (removed by the retention pass); 0 keeps them for ever
    environments_keep_days: float = Field(default=14.0, ge=0)
    #: seconds an environment's build may take before it fails its jobs
    environment_build_timeout: float = Field(default=1800.0, gt=0)
    #: what builds environments: "auto" (uv when found, else venv and pip), "uv", "pip"
    environment_installer: Literal["auto", "uv", "pip"] = "auto"
    #: prefixes of the server's environment variables kept from jobs, besides CORRAL_*
    job_env_deny: list[str] = Field(default_factory=lambda: list(JOB_ENV_DENY))
    #: when the server runs as root, tasks run as this user (default: "nobody" is NOT
    #: assumed; without it a root server runs tasks as root and says so in the log)
    run_as: str | None = None
    #: a cgroup per task, which finds, kills and counts all its processes and holds it to
    #: its flavor's memory: "auto" (what the machine offers: v2, else v1, else none), "v2"
    #: or "v1" (the server does not start without it), "off" (each task's keeper, a child
    #: subreaper, still kills what the task leaves)
    task_cgroups: Literal["auto", "v2", "v1", "off"] = "auto"
    #: MB of each task's log kept: its first half and its last half; the middle is dropped
    #: and said so (0: no cap)
    task_log_max_mb: int = Field(default=100, ge=0)
    #: what runs the jobs that give `engine.image_url` in their image: "podman" (found on
    #: the server's PATH); unset, such jobs are refused (docs/environments.md#images)
    container_runtime: Literal["podman"] | None = None
    #: options added to every `podman run` of a task, before the image, for what this
    #: machine needs (["--runtime=runc"], ulimits within the server's own, ...)
    container_options: list[str] = Field(default_factory=list)
    #: object storage for every project that has none of its own in `project_s3`
    s3: S3Config | None = None
    #: object storage per project, keyed by project id (`corral info` shows the default one)
    project_s3: dict[str, S3Config] = Field(default_factory=dict)
    #: where registered models are kept: a folder or an s3:// URL ($CORRAL_HOME/models)
    model_store: str | None = None
    #: the output channel registered as a model when a job does not name one
    model_channel: str = "train_url"
    #: tries of each upload to object storage, and seconds between them (doubling)
    upload_retries: int = Field(default=3, ge=1)
    upload_retry_delay: float = Field(default=1.0, ge=0)
    #: seconds between passes of the storage component (metrics, staging, uploads)
    storage_interval: float = Field(default=1.0, gt=0)
    #: run jobs on this Ray cluster instead of this machine ("auto", "HOST:PORT" or
    #: "ray://HOST:PORT"); needs the ray extra
    ray_address: str | None = None
    #: the Ray namespace corral's actors and placement groups are named in
    ray_namespace: str = "corral"
    #: seconds to reach a Ray cluster at start before giving up (the server exits)
    ray_connect_timeout: float = Field(default=15.0, gt=0)
    #: seconds a Ray cluster may be unreachable before the tasks on it count as lost with
    #: their nodes (and their jobs are queued again); a cluster's own nodes give up on a
    #: head they cannot reach after 60 s
    ray_lost_after: float = Field(default=60.0, ge=0)
    #: the Ray clusters' nodes see the server's files at the same paths (a shared file
    #: system): tasks read their inputs there instead of copies shipped to their node
    ray_shared_fs: bool = False
    #: notebooks (docs/notebooks.md): the seconds of a timing lease, and of an idle lease,
    #: when a notebook asks for none; the priority of their sessions (1-3); the engine that
    #: runs JupyterLab when a notebook names none (unset: the server's own Python); seconds
    #: between looks at a session's activity; seconds its JupyterLab has to answer once
    #: its job runs
    notebook_lease: float = Field(default=14400.0, ge=1)
    notebook_idle: float = Field(default=3600.0, ge=1)
    notebook_priority: int = Field(default=2, ge=1, le=3)
    notebook_image: str | None = None
    notebook_check_interval: float = Field(default=30.0, gt=0)
    notebook_start_timeout: float = Field(default=300.0, gt=0)
    #: the port notebooks are served on, an origin apart from the console's (unset: the
    #: port after `port`, any free one when `port` is 0); the address browsers reach them
    #: at, when not `http://<the host name a request came to>:<notebook_port>` (behind a
    #: TLS proxy: docs/security.md#the-network)
    notebook_port: int | None = Field(default=None, ge=0, le=65535)
    notebook_url: str | None = None
    #: seconds a job's TensorBoard (tensorboard/enable, docs/jobs.md#tensorboard) is kept
    #: running after the last request to it; at most this many run at once (the least
    #: recently used stops for a new one)
    tensorboard_idle: float = Field(default=600.0, gt=0)
    tensorboard_max: int = Field(default=16, ge=1)
    #: high availability (docs/high-availability.md): this server's name, unique among the
    #: servers on one database (default: the machine's host name); seconds a leader's lease
    #: lasts (by the database's clock); seconds between its renewals
    server_name: str | None = Field(default=None, max_length=128)
    leader_lease: float = Field(default=10.0, ge=1, le=300)
    leader_renew: float = Field(default=2.0, gt=0)
    #: a connection pooler in transaction mode (PgBouncer) stands between corral and
    #: PostgreSQL: corral prepares no statement on the database server
    database_pooler: bool = False

    @field_validator("home", mode="after")
    @classmethod
    def _abs_home(cls, v: pathlib.Path) -> pathlib.Path:
        return v.expanduser().resolve()

    @model_validator(mode="after")
    def _lease_fits(self) -> Settings:
        lease_ms = round(self.leader_lease * 1000)
        problem = leadership.check_times(lease_ms, round(self.leader_renew * 1000),
                                         leadership.margin_for(lease_ms))
        if problem:
            raise ValueError(f"leader_lease and leader_renew: {problem}")
        return self

    @model_validator(mode="after")
    def _pools_fit(self) -> Settings:
        seen: set[str] = set()
        for p in self.pools:
            if p.pool_id in seen:
                raise ValueError(f"pools: two pools are named '{p.pool_id}'")
            seen.add(p.pool_id)
        problem = self.pool_conflict()
        if problem:
            raise ValueError(problem)
        return self

    def pool_conflict(self) -> str | None:
        """Why the default pool's executor is ambiguous, if it is (also for settings
        updated after validation, as `corral server --ray` does)."""
        own = next((p for p in self.pools if p.pool_id == self.default_pool), None)
        if (self.ray_address and own is not None and own.executor_key is not None
                and own.executor_key != f"ray:{self.ray_address}"):
            return (f"pools: ray_address ({self.ray_address}) puts the default pool "
                    f"'{self.default_pool}' on that Ray cluster, but its [[pools]] entry "
                    f"puts it on {_executor_words(own.executor_key)}; say it in one place")
        return None

    def pool_executors(self) -> dict[str, str]:
        """Each pool's executor key: LOCAL or "ray:<address>" (the default pool's first)."""
        own = next((p for p in self.pools if p.pool_id == self.default_pool), None)
        default = (f"ray:{self.ray_address}" if self.ray_address
                   else (own.executor_key if own is not None else None) or LOCAL)
        out = {self.default_pool: default}
        for p in self.pools:
            out.setdefault(p.pool_id, p.executor_key or default)
        return out

    @field_validator("accelerators", mode="before")
    @classmethod
    def _counts(cls, v: Any) -> Any:
        if isinstance(v, dict):  # {npu = 8} is short for {npu = {count = 8}}
            v = {k: {"count": n} if isinstance(n, int) else n for k, n in v.items()}
            _accel_names(v)
        return v

    @classmethod
    def settings_customise_sources(
        cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource, dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, _TomlSource(settings_cls))

    @property
    def db_url(self) -> str:
        return self.database_url or f"sqlite:///{self.home / 'corral.db'}"

    @property
    def runs_dir(self) -> pathlib.Path:
        return self.home / "runs"

    @property
    def envs_dir(self) -> pathlib.Path:
        """Where the environments built for jobs' requirements are cached."""
        return self.home / "envs"

    @property
    def key_file(self) -> pathlib.Path:
        return self.server_key_file or self.home / "server.key"

    @property
    def credentials_file(self) -> pathlib.Path:
        """Where the CLI keeps its login (and the first start writes the admin's)."""
        return self.home / "credentials.json"

    @property
    def models_dir(self) -> str:
        return self.model_store or str(self.home / "models")

    def s3_for(self, project_id: str, project_name: str | None = None) -> S3Config | None:
        """The object store of a project: its own, else the default one, else none."""
        for key in (project_id, project_name):
            if key and key in self.project_s3:
                return self.project_s3[key]
        return self.s3

    def default_engine(self) -> EngineConfig:
        v = sys.version_info
        return EngineConfig(engine_id=f"python-{v.major}.{v.minor}", engine_name="Python",
                            engine_version=f"{v.major}.{v.minor}.{v.micro}",
                            python=sys.executable)

    def all_engines(self) -> list[EngineConfig]:
        return [self.default_engine(), *self.engines]


class _TomlSource(PydanticBaseSettingsSource):
    """Reads the TOML file named by CORRAL_CONFIG, or config.toml in CORRAL_HOME."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        path = os.environ.get("CORRAL_CONFIG")
        if not path:
            home = os.environ.get("CORRAL_HOME") or str(pathlib.Path.home() / ".corral")
            path = str(pathlib.Path(home).expanduser() / "config.toml")
        p = pathlib.Path(path)
        if not p.is_file():
            return {}
        import tomllib

        with p.open("rb") as fh:
            return tomllib.load(fh)


def ray_address_of(key: str) -> str | None:
    """The Ray address of an executor key, None for this machine."""
    return key.removeprefix("ray:") if key.startswith("ray:") else None


def public_address(address: str) -> str:
    """A cluster's address fit to show: "ray://user:secret@head:10001" as "ray://head:10001"."""
    scheme, sep, rest = address.rpartition("://")
    host = rest.rpartition("@")[2]
    return f"{scheme}{sep}{host}"


def _executor_words(key: str) -> str:
    address = ray_address_of(key)
    return "this machine" if address is None else f"the Ray cluster at {address}"


def load(**overrides: Any) -> Settings:
    return Settings(**{k: v for k, v in overrides.items() if v is not None})
