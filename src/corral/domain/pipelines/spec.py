"""What a user writes: a pipeline of tasks, each an ordinary training job's template.

The body of `POST /v2/{project_id}/pipelines` (JSON or YAML). A task is a training job's
algorithm and spec (docs/jobs.md), plus where it sits in the graph: `depends_on`, a
trigger rule, a `when` condition, `finally`, a fan-out (`for_each`, `parallelism`) and
`cache`. Data flows by reference: an input channel may name an upstream task's output
channel (`from: train.outputs.train_url`), and a parameter an upstream task's final metric
(`metric: eval.accuracy`) or a pipeline parameter (`param: epochs`); both are resolved
when the task is submitted.

`shape.parse` validates a body, then checks the graph and every reference in it, so that
an accepted pipeline always has an order to run in and names only what exists.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from corral.domain import specs
from corral.domain.pipelines import status

#: task names are identifiers: references (`train.outputs.x`, `train.loss`) use them
TASK_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,31}\Z")
MAX_TASKS = 100
MAX_ITEMS = 100
#: task runs of one attempt, every item counted
MAX_RUNS = 500
DURATION_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(value: Any, what: str) -> int:
    """Seconds, from a number of seconds or a string: 90, "90s", "10m", "2h", "7d"."""
    if isinstance(value, bool):
        raise ValueError(f"{what} must be a duration (90, 90s, 10m, 2h, 7d)")
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        raw = str(value).strip().lower()
        unit = raw[-1] if raw and raw[-1] in DURATION_UNITS else ""
        try:
            seconds = float(raw[:-1] if unit else raw) * DURATION_UNITS[unit]
        except ValueError:
            raise ValueError(f"{what} '{value}' is not a duration (90, 90s, 10m, 2h, 7d)") \
                from None
    if not 1 <= seconds <= 366 * 86400:
        raise ValueError(f"{what} must be between 1 second and a year")
    return int(seconds)


class Param(specs.Model):
    """A parameter of a task: a `value`, a pipeline parameter (`param`) or an upstream
    task's final metric (`metric: TASK.METRIC`)."""

    name: str
    value: str | None = None
    param: str | None = None
    metric: str | None = None
    description: str | None = None

    @field_validator("value", mode="before")
    @classmethod
    def _scalar(cls, v: Any) -> Any:
        return specs.scalar_str(v)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not specs.PARAM_RE.match(v):
            raise ValueError("parameter names are 1-128 characters without spaces or '='")
        return v

    @model_validator(mode="after")
    def _one(self) -> Param:
        given = [k for k in ("value", "param", "metric") if getattr(self, k) is not None]
        if len(given) > 1:
            raise ValueError(f"parameter '{self.name}': give one of value, param, metric")
        return self


class InputChannel(specs.Model):
    """An input channel: a path or URL (`remote.obs.obs_url`, as in a job), or an upstream
    task's output channel (`from: TASK.outputs.CHANNEL`)."""

    name: str
    from_: str | None = Field(default=None, alias="from")
    remote: specs.InputRemote | None = None
    description: str | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return _channel(v)

    @model_validator(mode="after")
    def _one(self) -> InputChannel:
        if (self.from_ is None) == (self.remote is None or self.remote.obs is None):
            raise ValueError(f"input '{self.name}': give `from` or `remote.obs.obs_url`")
        return self


class OutputChannel(specs.Model):
    """An output channel: the pipeline gives each task run a folder of its own for it."""

    name: str
    description: str | None = None
    remote: Any = None

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return _channel(v)

    @model_validator(mode="after")
    def _placed(self) -> OutputChannel:
        if self.remote is not None:
            raise ValueError(f"output '{self.name}': a pipeline places its tasks' outputs "
                             "itself (under `output_root`); give the channel's name only")
        return self


class TaskAlgorithm(specs.Model):
    """A task's algorithm: as a job's (docs/jobs.md), with channels by reference."""

    code_dir: str | None = None
    boot_file: str | None = None
    command: str | None = None
    working_dir: str | None = None
    engine: specs.Engine | None = None
    environments: dict[str, str] = Field(default_factory=dict)
    parameters: list[Param] = Field(default_factory=list)
    inputs: list[InputChannel] = Field(default_factory=list)
    outputs: list[OutputChannel] = Field(default_factory=list)

    @field_validator("environments", mode="before")
    @classmethod
    def _env(cls, v: Any) -> Any:
        if isinstance(v, dict):
            return {k: specs.scalar_str(x) for k, x in v.items()}
        return v


class Cache(specs.Model):
    """Reuse an earlier identical run's outputs (same template, code content, parameters
    and input contents) that succeeded at most `max_age` ago."""

    max_age: int = 7 * 86400

    @field_validator("max_age", mode="before")
    @classmethod
    def _age(cls, v: Any) -> int:
        return parse_duration(v, "cache.max_age")


class Task(specs.Model):
    name: str
    description: str | None = Field(default=None, max_length=256)
    depends_on: list[str] = Field(default_factory=list, max_length=MAX_TASKS)
    #: all_success by default; all_done for a `finally` task
    trigger: status.Rule | None = None
    when: str | None = None
    finally_: bool = Field(default=False, alias="finally")
    #: one run per item; each item's entries are set as that run's parameters
    for_each: list[dict[str, str]] | None = Field(default=None, min_length=1,
                                                  max_length=MAX_ITEMS)
    #: at most this many items running at once
    parallelism: int | None = Field(default=None, ge=1, le=MAX_ITEMS)
    cache: Cache | None = None
    #: restarts of the task's job after a failure (its fault-tolerance/job-retry-num)
    retries: int = Field(default=0, ge=0, le=100)
    algorithm: TaskAlgorithm
    spec: specs.Spec = Field(default_factory=specs.Spec)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not TASK_NAME_RE.match(v):
            raise ValueError(f"task name '{v}': a letter or '_', then letters, digits or "
                             "'_', at most 32")
        return v

    @field_validator("for_each", mode="before")
    @classmethod
    def _items(cls, v: Any) -> Any:
        if isinstance(v, list):
            return [{k: specs.scalar_str(x) for k, x in item.items()}
                    if isinstance(item, dict) else item for item in v]
        return v

    @model_validator(mode="after")
    def _fan(self) -> Task:
        if self.parallelism is not None and self.for_each is None:
            raise ValueError(f"task '{self.name}': parallelism goes with for_each")
        for item in self.for_each or []:
            for key in item:
                if not specs.PARAM_RE.match(key):
                    raise ValueError(f"task '{self.name}': for_each parameter '{key}' is "
                                     "not a parameter name")
        return self

    @property
    def rule(self) -> status.Rule:
        if self.trigger is not None:
            return self.trigger
        return status.Rule.ALL_DONE if self.finally_ else status.Rule.ALL_SUCCESS

    @property
    def items(self) -> int | None:
        """How many runs the task fans out into; None when it does not."""
        return None if self.for_each is None else len(self.for_each)


class ModelSave(specs.Model):
    """The model registered when the pipeline succeeds: a task's output channel."""

    task: str
    channel: str
    name: str

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not specs.NAME_RE.match(v):
            raise ValueError("model names are 1-64 letters, digits, '_' or '-'")
        return v


class Metadata(specs.Model):
    name: str
    description: str = Field(default="", max_length=256)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not specs.NAME_RE.match(v):
            raise ValueError("name must be 1-64 letters, digits, '_' or '-'")
        return v

    @field_validator("description", mode="before")
    @classmethod
    def _desc(cls, v: Any) -> Any:
        return "" if v is None else v


class PipelineCreate(specs.Model):
    """The body of `POST /v2/{project_id}/pipelines`."""

    kind: Literal["pipeline"] = "pipeline"
    metadata: Metadata
    #: values tasks take with `param:` and conditions read as `params.NAME`
    parameters: dict[str, str] = Field(default_factory=dict)
    #: where task runs' output folders go (default: the project's own tree)
    output_root: str | None = None
    #: seconds (or 10m, 2h) from the start of each run of the pipeline
    timeout: int | None = None
    tasks: list[Task] = Field(min_length=1, max_length=MAX_TASKS)
    model: ModelSave | None = None

    @field_validator("parameters", mode="before")
    @classmethod
    def _params(cls, v: Any) -> Any:
        if isinstance(v, dict):
            return {k: specs.scalar_str(x) for k, x in v.items()}
        return v

    @field_validator("timeout", mode="before")
    @classmethod
    def _timeout(cls, v: Any) -> Any:
        return None if v is None else parse_duration(v, "timeout")


def _channel(v: str) -> str:
    if not specs.CHANNEL_RE.match(v):
        raise ValueError(
            "channel names start with a letter or '_' and hold letters, digits, '_' or '-'")
    return v
