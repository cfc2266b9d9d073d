"""What a user writes to create an incremental-learning loop, with Sedna's field names.

A Sedna user's `IncrementalLearningJob` loads here with its `spec` as it was, but for the
templates: a `template` is the body of a corral training job (code, boot file or command,
parameters, flavor, pool, retries) rather than a pod template. corral's additions are
marked so. Unlike the REST API's job bodies, a loop's own fields are strict: a misspelt
`checkPeriodSecond` is refused rather than left to its default.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from corral.domain import errors, models, specs
from corral.domain.incremental import triggers

#: the train trigger's one metric: new training samples since the last round
NUM_OF_SAMPLES = "num_of_samples"
#: what a loop is, for bodies that say (`kind: IncrementalLearningJob`, as Sedna's do)
KIND_NAME = "IncrementalLearningJob"
HHMM = re.compile(r"^([01]?[0-9]|2[0-3]):([0-5][0-9])\Z")
#: the fields of a template the loop sets itself
LOOP_SETS = ("model",)
#: Sedna's node of a worker (a pod template's `spec.nodeName`): in a template's `spec`, the
#: node its job is pinned to (corral's `spec.resource.node_name`)
NODE_NAME = "nodeName"


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Condition(Strict):
    """`metric operator threshold`, as Sedna writes it."""

    operator: str = Field(max_length=8)
    threshold: float = Field(ge=-1e15, le=1e15)
    metric: str = Field(max_length=160)

    @field_validator("operator")
    @classmethod
    def _operator(cls, v: str) -> str:
        if v not in triggers.OPERATORS:
            raise ValueError(f"operator '{v}' is not one of {', '.join(triggers.OPERATORS)}")
        return v

    @field_validator("metric")
    @classmethod
    def _metric(cls, v: str) -> str:
        triggers.parse_metric(v)
        return v

    def describe(self) -> str:
        return f"{self.metric} {triggers.OPERATORS[self.operator]} {self.threshold:g}"


class Timer(Strict):
    """A daily window, in the server's local time: `start` to `end` ("HH:MM"); it wraps
    midnight when start is later than end."""

    start: str = Field(max_length=5)
    end: str = Field(max_length=5)

    @field_validator("start", "end")
    @classmethod
    def _hhmm(cls, v: str) -> str:
        if not HHMM.match(v):
            raise ValueError(f"'{v}' is not a time of day as HH:MM")
        return v

    def minutes(self) -> tuple[int, int]:
        return minute_of(self.start), minute_of(self.end)


def minute_of(hhmm: str) -> int:
    hours, minutes = hhmm.split(":")
    return int(hours) * 60 + int(minutes)


class Trigger(Strict):
    #: how often the trigger is checked (corral honours it; Sedna checks every 10 s)
    checkPeriodSeconds: int = Field(default=60, ge=1, le=86400)
    timer: Timer | None = None
    condition: Condition | None = None


class DatasetRef(Strict):
    name: str = Field(max_length=64)
    #: the share of each batch of new samples that goes to training; the rest is one
    #: evaluation version
    trainProb: float = Field(default=0.8, gt=0, lt=1)


class ModelRef(Strict):
    """A corral model: its latest version, or one by `version` or `alias` (corral)."""

    name: str = Field(max_length=64)
    version: int | None = Field(default=None, ge=1, le=2**31 - 1)
    alias: str | None = Field(default=None, max_length=64)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not specs.NAME_RE.match(v):
            raise ValueError("model names are 1-64 letters, digits, '_' or '-'")
        return v

    @model_validator(mode="after")
    def _one(self) -> ModelRef:
        if self.version is not None and self.alias is not None:
            raise ValueError("give a model version or an alias, not both")
        return self


class TrainSpec(Strict):
    template: dict[str, Any]
    trigger: Trigger = Field(default_factory=Trigger)

    @field_validator("template")
    @classmethod
    def _template(cls, v: dict[str, Any]) -> dict[str, Any]:
        return check_template(v)

    @model_validator(mode="after")
    def _metric(self) -> TrainSpec:
        cond = self.trigger.condition
        if cond is not None and cond.metric != NUM_OF_SAMPLES:
            raise ValueError(f"trainSpec.trigger.condition.metric: the train trigger's "
                             f"metric is {NUM_OF_SAMPLES}, not '{cond.metric}'")
        return self


class EvalSpec(Strict):
    template: dict[str, Any]
    #: the model new ones are compared with until the loop first promotes one (Sedna v2);
    #: the current model when not given
    initialModel: ModelRef | None = None

    @field_validator("template")
    @classmethod
    def _template(cls, v: dict[str, Any]) -> dict[str, Any]:
        return check_template(v)


class DeployModel(Strict):
    #: the model new versions are registered to (default: initialModel's)
    name: str | None = Field(default=None, max_length=64)
    #: corral: the alias a promotion moves
    alias: str = Field(default="production", max_length=64)
    hotUpdateEnabled: bool = False
    pollPeriodSeconds: int = Field(default=60, ge=1, le=3600)
    #: corral: how long the service has to acknowledge loading a model (default:
    #: 2 x pollPeriodSeconds + 30)
    ackTimeoutSeconds: int | None = Field(default=None, ge=1, le=86400)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str | None) -> str | None:
        if v is not None and not specs.NAME_RE.match(v):
            raise ValueError("model names are 1-64 letters, digits, '_' or '-'")
        return v

    @field_validator("alias")
    @classmethod
    def _alias(cls, v: str) -> str:
        try:
            return models.check_alias(v)
        except errors.BadParameter as exc:
            raise ValueError(exc.message) from None

    @property
    def ack_timeout_s(self) -> int:
        return self.ackTimeoutSeconds or 2 * self.pollPeriodSeconds + 30


class Parameter(Strict):
    key: str = Field(max_length=256)
    value: str = Field(max_length=4096)

    @field_validator("value", mode="before")
    @classmethod
    def _value(cls, v: Any) -> Any:
        return specs.scalar_str(v)


class HardExampleMining(Strict):
    """What the inference worker is told of hard-example mining (HEM_NAME, HEM_PARAMETERS);
    the samples it finds hard and appends to its file become new data."""

    name: str = Field(max_length=256)
    parameters: list[Parameter] = Field(default_factory=list, max_length=100)


class DeploySpec(Strict):
    model: DeployModel = Field(default_factory=DeployModel)
    #: the condition on the evaluation's metrics for a new model to be promoted (always,
    #: when there is none); its timer defers a promotion to the window
    trigger: Trigger | None = None
    #: corral: optional; without one, a promotion only moves the alias
    template: dict[str, Any] | None = None
    hardExampleMining: HardExampleMining | None = None

    @field_validator("template")
    @classmethod
    def _template(cls, v: dict[str, Any] | None) -> dict[str, Any] | None:
        return None if v is None else check_template(v)

    @model_validator(mode="after")
    def _mining(self) -> DeploySpec:
        if self.hardExampleMining is not None and self.template is None:
            raise ValueError("deploySpec.hardExampleMining needs deploySpec.template: the "
                             "inference worker is what finds hard examples")
        return self


class LoopSpec(Strict):
    dataset: DatasetRef
    initialModel: ModelRef
    trainSpec: TrainSpec
    evalSpec: EvalSpec
    deploySpec: DeploySpec = Field(default_factory=DeploySpec)
    #: a local folder under the project's storage, or an s3:// URL in its object store:
    #: rounds' samples, models, the deploy
    outputDir: str = Field(min_length=1, max_length=4096)
    #: corral: rounds that may fail in a row before the loop stops (Failed)
    maxFailedRounds: int = Field(default=3, ge=1, le=100)

    @property
    def model_name(self) -> str:
        """The model the loop registers new versions to and whose alias it moves."""
        return self.deploySpec.model.name or self.initialModel.name


class Metadata(Strict):
    name: str = Field(max_length=64)
    description: str = Field(default="", max_length=256)
    #: accepted for Sedna's bodies (a Kubernetes object has them); not used
    namespace: str | None = Field(default=None, max_length=253)
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not specs.NAME_RE.match(v):
            raise ValueError("name must be 1-64 letters, digits, '_' or '-'")
        return v


class LoopCreate(Strict):
    """The body that creates a loop (`POST .../incremental-learning-jobs`)."""

    apiVersion: str | None = Field(default=None, max_length=64)
    kind: Literal["IncrementalLearningJob"] | None = None
    metadata: Metadata
    spec: LoopSpec


def check_template(v: dict[str, Any]) -> dict[str, Any]:
    """A template is a training job's body less its name: refuse what cannot be one."""
    for key in LOOP_SETS:
        if key in v:
            raise ValueError(f"a template has no '{key}': the loop sets it")
    if v.get("kind") not in (None, "job"):
        raise ValueError("a template's kind is job (the loop sets it for evaluations)")
    job_body(v, "template")  # refuses what a job body refuses
    return v


def job_body(template: dict[str, Any], name: str) -> specs.JobCreate:
    """The template as a job named `name` (the loop fills in the rest)."""
    data = dict(template)
    meta = dict(data.get("metadata") or {})
    meta["name"] = name
    data["metadata"] = meta
    data.pop("kind", None)
    if isinstance(data.get("spec"), dict) and NODE_NAME in data["spec"]:
        data["spec"] = pinned(data["spec"])
    try:
        return specs.JobCreate.model_validate(data)
    except ValueError as exc:
        raise ValueError(specs.describe(exc)) from None


def pinned(spec: dict[str, Any]) -> dict[str, Any]:
    """A template's `spec` with Sedna's `nodeName` (a pod's node) as corral's
    `resource.node_name`."""
    out = dict(spec)
    node = out.pop(NODE_NAME)
    resource = out.get("resource")
    resource = dict(resource) if isinstance(resource, dict) else {}
    if resource.get("node_name") not in (None, node):
        raise ValueError(f"spec.{NODE_NAME} '{node}' and spec.resource.node_name "
                         f"'{resource['node_name']}' name two nodes")
    resource["node_name"] = node
    out["resource"] = resource
    return out


def parse(data: Any) -> LoopCreate:
    """The create body, or BadParameter saying what is wrong with it."""
    found: LoopCreate = specs.parse(LoopCreate, data)
    return found
