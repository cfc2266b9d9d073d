"""Request shapes of the ModelArts v2 training-jobs API, and the rules they must obey.

These models are what the API accepts and what the store keeps as a job's spec. Fields
corral does not act on (`remote_constraint`, ...) are accepted and echoed so that bodies
written for ModelArts still load; fields that would change what runs but that corral
cannot honour are refused with a clear message rather than silently ignored (see
jobfields.py for those of the seed's spec that are mapped onto corral's or refused).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema

from corral.domain import containers, environments, errors, faultspec, jobfields, jobs

#: a job's or a model's name, as JSON Schema writes patterns (see `Pattern`)
NAME_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
# \Z, not $: `$` also matches before a trailing newline, which would let "name\n" through.
NAME_RE = re.compile(NAME_PATTERN.removesuffix("$") + r"\Z")
ENV_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
#: an input or output channel's name, and a parameter's (as JSON Schema writes them)
CHANNEL_PATTERN = r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$"
PARAM_PATTERN = r"^[^\s=]{1,128}$"
CHANNEL_RE = re.compile(CHANNEL_PATTERN.removesuffix("$") + r"\Z")
PARAM_RE = re.compile(PARAM_PATTERN.removesuffix("$") + r"\Z")
#: an integer in ASCII digits (str.isdigit also takes '²', which int() refuses)
INT_RE = re.compile(r"^-?[0-9]+\Z")

# --- bounds and patterns -------------------------------------------------------------------
# Every number a request carries has both bounds, said in /openapi.json (`minimum`,
# `maximum`) and checked on the way in: an unbounded one reaches the database, which cannot
# hold it (SQLite raises beyond 64 bits, PostgreSQL beyond its column's type), and the
# request answers 500 instead of 400. The API's fields and parameters take these types.

#: counts, amounts and offsets: what a 32-bit INTEGER column holds (an offset in pages
#: times a page size stays far inside 64 bits)
MAX_COUNT = 2**31 - 1
#: times in milliseconds since the epoch, up to 9999-12-31T23:59:59.999Z
MAX_TIME_MS = 253_402_300_799_999
#: byte offsets into a file: what every JSON client reads exactly
MAX_BYTES = 2**53 - 1

Count = Annotated[int, Field(ge=0, le=MAX_COUNT)]
#: a number counted from 1 (a version, an attempt)
Ordinal = Annotated[int, Field(ge=1, le=MAX_COUNT)]
TimeMs = Annotated[int, Field(ge=0, le=MAX_TIME_MS)]
ByteOffset = Annotated[int, Field(ge=0, le=MAX_BYTES)]
#: an amount given as a decimal (cores, GB); never infinite nor NaN
Amount = Annotated[float, Field(ge=0, le=MAX_COUNT)]


@dataclasses.dataclass(frozen=True)
class Pattern:
    """`Annotated[str, Pattern(regex, message)]`: the whole string must match `regex`,
    written as JSON Schema has it (`^...$`), else `message`. The schema says the pattern,
    so that what /openapi.json shows is what is enforced; the message says it in words."""

    regex: str
    message: str

    def __get_pydantic_core_schema__(self, source: Any,
                                     handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        # fullmatch: `$` alone would also let a trailing newline through
        compiled = re.compile(self.regex)

        def check(value: str) -> str:
            if not compiled.fullmatch(value):
                raise ValueError(self.message)
            return value

        return core_schema.no_info_after_validator_function(check, handler(source))

    def __get_pydantic_json_schema__(self, schema: core_schema.CoreSchema,
                                     handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        out = handler(schema)
        out["pattern"] = self.regex
        return out


Name = Annotated[str, Pattern(NAME_PATTERN, "name must be 1-64 letters, digits, '_' or '-'")]
ModelName = Annotated[str, Pattern(NAME_PATTERN,
                                   "model names are 1-64 letters, digits, '_' or '-'")]
#: a resource pool's id, as the configuration defines them
PoolId = Annotated[str, Pattern(r"^[A-Za-z0-9_.-]{1,64}$",
                                "pool ids are 1-64 letters, digits, '_', '.' or '-'")]
NodeName = Annotated[str, Pattern(r"^[A-Za-z0-9_.:-]{1,128}$",
                                  "node names are 1-128 letters, digits, '_', '.', ':' or '-'")]
ChannelName = Annotated[str, Pattern(
    CHANNEL_PATTERN,
    "channel names start with a letter or '_' and hold letters, digits, '_' or '-'")]
ParameterName = Annotated[str, Pattern(
    PARAM_PATTERN, "parameter names are 1-128 characters without spaces or '='")]


class Model(BaseModel):
    # Unknown keys are dropped: the SDK and older bodies carry fields corral has no use for.
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class Parameter(Model):
    name: ParameterName
    value: str = ""
    description: str | None = None
    constraint: dict[str, Any] | None = None
    i18n_description: dict[str, Any] | None = None

    @field_validator("value", mode="before")
    @classmethod
    def _scalar_to_str(cls, v: Any) -> Any:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, int | float):
            return str(v)
        return "" if v is None else v


class ObsRef(Model):
    obs_url: str = Field(min_length=1, max_length=4096)


class DatasetRef(Model):
    """A version of a dataset of the job's project, as an input (docs/datasets.md).

    `id` and `version_id` may also be the dataset's name and the version's (V0002, 2).
    At submit the reference is pinned: both are replaced by the ids, and `obs_url` (where
    the version's frozen files are, as ModelArts fills it in) and corral's `name` and
    `version_name` are filled in; anything given for those is replaced.
    """

    id: str | None = Field(default=None, min_length=1, max_length=64)
    version_id: str | None = Field(default=None, min_length=1, max_length=64)
    obs_url: str | None = Field(default=None, max_length=4096)
    #: corral: the dataset's name and the version's, filled in at submit
    name: str | None = Field(default=None, max_length=64)
    version_name: str | None = Field(default=None, max_length=16)
    #: the SDK's: the share of the dataset the job reads; refused below 100 (a job reads
    #: the whole version: make a version of the samples it should read)
    dataset_proportion: int | None = Field(default=None, ge=0, le=100)

    @field_validator("dataset_proportion")
    @classmethod
    def _whole(cls, v: int | None) -> int | None:
        if v is not None and v != 100:
            raise ValueError("remote.dataset.dataset_proportion: corral gives a job the whole "
                             "version; make a version of the samples the job should read")
        return v


class InputRemote(Model):
    obs: ObsRef | None = None
    dataset: DatasetRef | None = None


class OutputRemote(Model):
    obs: ObsRef


class Input(Model):
    name: ChannelName
    description: str | None = None
    local_dir: str | None = None
    remote: InputRemote
    remote_constraint: list[dict[str, Any]] | None = None
    #: corral: the task sees what is added to this input or changed in it while it runs
    #: (a copy of it, on a Ray node or from object storage, is brought up to date)
    follow: bool | None = None

    @model_validator(mode="after")
    def _one_source(self) -> Input:
        obs, dataset = self.remote.obs, self.remote.dataset
        if (obs is None) == (dataset is None):
            raise ValueError(f"input '{self.name}': give remote.obs.obs_url (a path or URL) "
                             "or remote.dataset (id and version_id), one of the two")
        if dataset is not None and not dataset.id:
            raise ValueError(f"input '{self.name}': remote.dataset.id is missing: name the "
                             "dataset (its id or name) beside version_id")
        if dataset is not None and self.follow:
            raise ValueError(f"input '{self.name}': a dataset version never changes: follow "
                             "is for a folder or an object-storage input")
        if dataset is not None and not dataset.version_id:
            raise ValueError(f"input '{self.name}': remote.dataset.version_id is missing: a "
                             "job reads a version of a dataset (corral datasets version "
                             "create makes one)")
        return self

    @property
    def dataset(self) -> DatasetRef | None:
        """The dataset version the channel reads, if it reads one."""
        return self.remote.dataset if self.remote.obs is None else None

    @property
    def url(self) -> str:
        """Where the channel's data is: its path or URL, or (a dataset version) where the
        version's files are, once the reference is pinned at submit ('' before)."""
        if self.remote.obs is not None:
            return self.remote.obs.obs_url
        assert self.remote.dataset is not None
        return self.remote.dataset.obs_url or ""


class Output(Model):
    name: ChannelName
    description: str | None = None
    local_dir: str | None = None
    remote: OutputRemote
    mode: str | None = None
    period: str | None = None

    @property
    def url(self) -> str:
        return self.remote.obs.obs_url


class Engine(Model):
    engine_id: str | None = None
    engine_name: str | None = None
    engine_version: str | None = None
    image_url: str | None = None
    #: corral: Python packages the job needs, installed in a cached virtualenv made from
    #: the engine's interpreter (docs/environments.md)
    requirements: list[str] | None = None

    @field_validator("requirements")
    @classmethod
    def _requirements(cls, v: list[str] | None) -> list[str] | None:
        return environments.normalize(v) or None if v is not None else None

    @model_validator(mode="after")
    def _one_of_three(self) -> Engine:
        if self.image_url:  # the image is the whole environment (docs/environments.md#images)
            containers.check_reference(self.image_url)
            others = [f"engine.{k}" for k in ("engine_id", "engine_name", "engine_version",
                                              "requirements") if getattr(self, k)]
            if others:
                raise ValueError(f"engine.image_url runs the job in that image: give it "
                                 f"without {', '.join(others)}")
        return self


class Algorithm(Model):
    id: str | None = None
    name: str | None = None
    subscription_id: str | None = None
    item_version_id: str | None = None
    code_dir: str | None = None
    boot_file: str | None = None
    command: str | None = None
    parameters: list[Parameter] = Field(default_factory=list)
    inputs: list[Input] = Field(default_factory=list)
    outputs: list[Output] = Field(default_factory=list)
    engine: Engine | None = None
    local_code_dir: str | None = None
    working_dir: str | None = None
    environments: dict[str, str] = Field(default_factory=dict)
    policies: dict[str, Any] | None = None
    #: ModelArts' search from a YAML file and a framework folder: refused at submit
    #: (a search is given in policies.auto_search)
    autosearch_config_path: str | None = None
    autosearch_framework_path: str | None = None
    #: where the job writes visualization logs: a folder of an output channel
    summary: jobfields.Summary | None = None

    @field_validator("environments", mode="before")
    @classmethod
    def _env(cls, v: Any) -> Any:
        # The response shape in the reference is a list of one-key maps; accept both.
        if isinstance(v, list):
            merged: dict[str, Any] = {}
            for item in v:
                if not isinstance(item, dict):
                    raise ValueError("environments must be a map of names to values")
                merged.update(item)
            v = merged
        if isinstance(v, dict):
            return {k: scalar_str(val) for k, val in v.items()}
        return v

    @model_validator(mode="after")
    def _check(self) -> Algorithm:
        if self.subscription_id or self.item_version_id:
            raise ValueError(
                "subscribed algorithms are not supported: give algorithm.id (an algorithm "
                "of the project), code_dir + boot_file, or command"
            )
        has_code = bool(self.code_dir or self.boot_file)
        if has_code and not (self.code_dir and self.boot_file):
            raise ValueError("algorithm.code_dir and algorithm.boot_file go together")
        if not has_code and not self.command and not self.id:
            raise ValueError("algorithm needs id, code_dir + boot_file, or command")
        if len(self.environments) > 100:
            raise ValueError("at most 100 environment variables")
        for key, val in self.environments.items():
            if not ENV_RE.match(key) or len(key) > 8192:
                raise ValueError(f"environment variable name '{key}' is not valid")
            if len(val) > 4096:
                raise ValueError(f"environment variable '{key}' is longer than 4096 characters")
        names = [c.name for c in self.inputs] + [c.name for c in self.outputs]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"duplicate input/output channel names: {', '.join(sorted(dup))}")
        if self.summary is not None:
            self.summary.check()
        return self

    def summary_dir(self) -> str | None:
        """The folder `summary` names, as the job writes it (CORRAL_SUMMARY_DIR);
        BadParameter when it is in none of the output channels."""
        try:
            return jobfields.summary_dir(self.summary, [(o.name, o.url, o.local_dir or o.url)
                                                        for o in self.outputs])
        except ValueError as exc:
            raise errors.BadParameter(str(exc)) from None


def scalar_str(v: Any) -> Any:
    """A number or boolean as the string a job's environment or annotation holds (JSON and
    TOML bodies give them unquoted); anything else as it is, for validation to judge."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return str(v)
    return v


class Metadata(Model):
    name: Name
    workspace_id: str = "0"
    description: str = Field(default="", max_length=256)
    annotations: dict[str, str] = Field(default_factory=dict)

    @field_validator("description", mode="before")
    @classmethod
    def _desc(cls, v: Any) -> Any:
        return "" if v is None else v

    @field_validator("annotations", mode="before")
    @classmethod
    def _ann(cls, v: Any) -> Any:
        if isinstance(v, dict):
            return {k: scalar_str(val) for k, val in v.items()}
        return v

    @field_validator("annotations")
    @classmethod
    def _fault_tolerance(cls, v: dict[str, str]) -> dict[str, str]:
        faultspec.check_annotations(v)
        jobfields.check_applications(v)
        return v

    @property
    def retry_limit(self) -> int:
        return int(self.annotations.get(jobs.RETRY_ANNOTATION, "0"))


class Resource(Model):
    policy: str | None = None
    flavor_id: str | None = None
    flavor_name: str | None = None
    node_count: int = Field(default=1, ge=1, le=1024)
    pool_id: PoolId | None = None
    #: corral: the one node of its pool the job runs on (as `corral pools` names it)
    node_name: NodeName | None = None


class LogExportPath(Model):
    obs_url: str | None = None
    host_path: str | None = None


class SchedulePolicy(Model):
    #: 1 (low, the default) to 3 (high); higher priorities start first and may preempt
    priority: int | None = Field(default=None, ge=1, le=3)
    #: a higher-priority job may stop this one (SIGTERM, grace period) and requeue it
    preemptible: bool | None = None
    #: corral: a gang's tasks one per node where possible (spread, the default), or
    #: packed onto as few nodes as fit (pack)
    placement: Literal["pack", "spread"] | None = None

    @property
    def strategy(self) -> str:
        return self.placement or "spread"


class Spec(Model):
    resource: Resource = Field(default_factory=Resource)
    log_export_path: LogExportPath | None = None
    schedule_policy: SchedulePolicy | None = None
    #: refused when it holds any: corral mounts nothing (jobfields.check_volumes)
    volumes: list[dict[str, Any]] | None = None
    #: the job's max_run_time in hours, as ModelArts says it
    auto_stop: jobfields.AutoStop | None = None
    #: corral: rules, budgets, backoff, hang timeout, run time limit, checkpoint channel
    fault_tolerance: faultspec.FaultTolerance | None = None

    @field_validator("volumes")
    @classmethod
    def _volumes(cls, v: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
        jobfields.check_volumes(v)
        return v

    @property
    def max_run_time(self) -> int | None:
        """Seconds the job may run: the earlier of max_run_time and auto_stop."""
        limits = [t for t in (self.fault_tolerance and self.fault_tolerance.max_run_time,
                              self.auto_stop and self.auto_stop.seconds) if t]
        return min(limits, default=None)

    @property
    def run_limit_name(self) -> str:
        """The field `max_run_time` comes from, as a stopped job's reason names it."""
        own = self.fault_tolerance and self.fault_tolerance.max_run_time
        auto = self.auto_stop and self.auto_stop.seconds
        return "auto_stop" if auto and (not own or auto < own) else "max_run_time"


#: the description of the `model_url` parameter corral adds for a job's model
MODEL_PARAMETER_NOTE = "corral: the files of model"
#: kinds of job that take a registered model (`model`) and pass it as --model_url
MODEL_KINDS = ("inference", "evaluation")


class ModelRef(Model):
    """corral: a registered model a job uses, by version or alias (the latest when neither).

    At submit the reference is pinned: `version` is filled in, so moving an alias later
    never changes what a job used.
    """

    name: ModelName
    version: Ordinal | None = None
    alias: str | None = None
    #: where the version's files are; filled in at submit (anything given is replaced)
    location: str | None = None

    @model_validator(mode="after")
    def _one(self) -> ModelRef:
        # A stored (pinned) reference keeps the alias it was given beside the version.
        if self.version is not None and self.alias is not None and self.location is None:
            raise ValueError("give a model version or an alias, not both")
        return self


class JobCreate(Model):
    """The body of `POST /v2/{project_id}/training-jobs`."""

    #: corral: `job` trains; `inference` and `evaluation` run a registered model (`model`)
    kind: Literal["job", "inference", "evaluation"] = "job"
    metadata: Metadata
    algorithm: Algorithm
    spec: Spec = Field(default_factory=Spec)
    model: ModelRef | None = None
    #: corral: a second registered model the job reads beside `model` (what an
    #: evaluation compares it with), pinned at submit as `model` is and shipped with it
    #: to a Ray node; no argument names it (a loop's evaluation finds it in MODEL_URLS)
    baseline_model: ModelRef | None = None

    @model_validator(mode="after")
    def _model(self) -> JobCreate:
        if self.kind in MODEL_KINDS and self.model is None:
            raise ValueError(f"a job of kind '{self.kind}' needs `model` (name, and version "
                             "or alias)")
        if self.baseline_model is not None and self.model is None:
            raise ValueError("baseline_model goes with `model`")
        if self.model is not None and any(p.name == "model_url"
                                          and not (p.description or "").startswith(
                                              MODEL_PARAMETER_NOTE)
                                          for p in self.algorithm.parameters):
            raise ValueError("parameter 'model_url' is set by corral from `model`")
        ft = self.spec.fault_tolerance
        if ft is not None and ft.checkpoint is not None and ft.checkpoint not in {
                o.name for o in self.algorithm.outputs}:
            raise ValueError(f"spec.fault_tolerance.checkpoint: '{ft.checkpoint}' is not an "
                             "output channel of the job")
        return self


class JobUpdate(Model):
    description: str = Field(default="", max_length=256)


class JobAction(Model):
    action_type: Literal["terminate"]


#: corral adds `user_name`, `pool_id`, `kind` (job, inference, evaluation) and `owner_kind`
#: (what made the job: pipeline, incremental_learning, ...; "" for none)
FilterKey = Literal["name", "phase", "secondary_phase", "create_time", "description",
                    "user_name", "pool_id", "kind", "owner_kind"]
FilterOp = Literal["like", "in", "between", "not"]
SortKey = Literal["create_time", "name", "phase", "duration", "start_time"]


class Filter(Model):
    key: FilterKey
    operator: FilterOp = "in"
    value: list[Annotated[str, Field(max_length=256)]] = Field(min_length=1, max_length=100)

    @field_validator("value", mode="before")
    @classmethod
    def _values(cls, v: Any) -> Any:
        if isinstance(v, str | int | float):
            v = [v]
        if isinstance(v, list):
            return [str(x) for x in v]
        return v

    @model_validator(mode="after")
    def _check(self) -> Filter:
        if self.operator == "between" and len(self.value) != 2:
            raise ValueError("'between' takes exactly two values: [low, high]")
        if self.key == "create_time":
            if self.operator == "like":
                raise ValueError("'like' does not apply to create_time")
            for item in self.value:
                if not INT_RE.match(item) or abs(int(item)) > MAX_TIME_MS:
                    raise ValueError("create_time values are timestamps in milliseconds, "
                                     f"at most {MAX_TIME_MS} (the end of year 9999)")
        if self.key in ("phase", "secondary_phase") and self.operator != "like":
            phases = jobs.Phase if self.key == "phase" else jobs.SecondaryPhase
            known = {p.value for p in phases}
            bad = [x for x in self.value if x not in known]
            if bad:
                raise ValueError(f"unknown {self.key} {bad[0]!r}; one of {sorted(known)}")
        return self


class Search(Model):
    """The body of `POST /v2/{project_id}/training-job-searches`.

    `offset` counts pages, as the reference says: rows skipped are offset * limit.
    """

    offset: Count = Field(default=0, description="a page index: rows skipped are offset "
                          "* limit")
    limit: int = Field(default=10, ge=1, le=50)
    sort_by: SortKey = "create_time"
    order: Literal["asc", "desc"] = "desc"
    group_by: str | None = None
    filters: list[Filter] = Field(default_factory=list, max_length=20)
    #: corral: the page after the one whose `next_cursor` this is (offset is then ignored)
    cursor: str | None = Field(default=None, max_length=512, description=(
        "corral extension: the `next_cursor` of the page before; the next page is found "
        "from that page's last job instead of by skipping `offset * limit` rows, which "
        "stays fast however deep the page. Sorting by create_time, name or phase"))

    @model_validator(mode="after")
    def _cursor_sort(self) -> Search:
        if self.cursor is not None and self.sort_by not in CURSOR_SORTS:
            raise ValueError(f"a cursor pages jobs sorted by {', '.join(CURSOR_SORTS)}")
        return self


#: the sort keys a search cursor pages by (never NULL; duration is computed)
CURSOR_SORTS = ("create_time", "name", "phase")


def parse(model: type[BaseModel], data: Any) -> Any:
    """Validate `data` against `model`, raising BadParameter with a readable message."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise errors.BadParameter(describe(exc)) from None


def describe(exc: Any) -> str:
    """One line for a pydantic ValidationError: where and what."""
    parts = []
    for err in exc.errors()[:3]:
        loc = ".".join(str(x) for x in err.get("loc", ()) if x != "body")
        msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        parts.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(parts)
