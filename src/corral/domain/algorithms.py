"""Algorithms (ModelArts' algorithm management): a saved job configuration (code, boot
file or command, engine, parameters with defaults and constraints, input and output
channels) that a training job names by `algorithm.id` instead of giving its own.

The shapes are the reference's create and modify bodies; `apply` is the rule for making a
job's algorithm of one: the algorithm gives the code, boot file, command and engine; the
job gives its channels' URLs and may override the parameters' values within their
constraints. No I/O here: the service layer finds the algorithm and checks paths.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from corral.domain import errors, specs
from corral.domain.search import spec as search_spec

#: the parameter types a constraint may name (ModelArts' console offers these)
TYPES = ("String", "Integer", "Float", "Boolean")
#: what `valid_range` is: nothing, [low, high], or the values allowed
VALID_TYPES = ("None", "Range", "Enumeration")
#: what a job's input channel may be, of what `remote_constraints[].data_type` names: a
#: path or URL (remote.obs), or a dataset version (remote.dataset)
OBS_TYPES = ("obs", "OBS")
DATASET_TYPES = ("dataset", "DATASET")
RESOURCE_KEYS = ("flavor_type", "device_distributed_mode", "host_distributed_mode")


class Constraint(specs.Model):
    """What a parameter's value may be (`type`, `required`, `valid_type` + `valid_range`),
    and whether a job may change it (`editable`)."""

    type: str | None = None
    editable: bool | None = None
    required: bool | None = None
    sensitive: bool | None = None  #: not acted on (nor by ModelArts)
    valid_type: str | None = None
    valid_range: list[str] = Field(default_factory=list, max_length=1000)

    @field_validator("valid_range", mode="before")
    @classmethod
    def _strs(cls, v: Any) -> Any:
        return [specs.scalar_str(x) for x in v] if isinstance(v, list) else v

    @model_validator(mode="after")
    def _check(self) -> Constraint:
        if self.type is not None and self.type not in TYPES:
            raise ValueError(f"constraint type '{self.type}' is not one of {', '.join(TYPES)}")
        if self.valid_type is not None and self.valid_type not in VALID_TYPES:
            raise ValueError(f"valid_type '{self.valid_type}' is not one of "
                             f"{', '.join(VALID_TYPES)}")
        if self.valid_type == "Range":
            if len(self.valid_range) != 2:
                raise ValueError("a Range's valid_range is [low, high]")
            low, high = (_number(x, "valid_range") for x in self.valid_range)
            if low > high:
                raise ValueError("a Range's valid_range is [low, high], low first")
        if self.valid_type == "Enumeration" and not self.valid_range:
            raise ValueError("an Enumeration's valid_range lists the values allowed")
        return self


class Parameter(specs.Parameter):
    constraint: Constraint | None = None  # type: ignore[assignment]


class RemoteConstraint(specs.Model):
    data_type: str | None = Field(default=None, max_length=64)
    attributes: list[dict[str, str]] | None = None


class InputChannel(specs.Model):
    name: specs.ChannelName
    description: str | None = Field(default=None, max_length=256)
    remote_constraints: list[RemoteConstraint] = Field(default_factory=list, max_length=20)

    def takes(self, given: specs.Input) -> bool:
        """Whether the channel takes what a job gives it: a path or URL, or a dataset
        version (any, when its constraints name no data type)."""
        kinds = [c.data_type for c in self.remote_constraints if c.data_type]
        allowed = DATASET_TYPES if given.dataset is not None else OBS_TYPES
        return not kinds or any(k in allowed for k in kinds)


class OutputChannel(specs.Model):
    name: specs.ChannelName
    description: str | None = Field(default=None, max_length=256)


class JobConfig(specs.Model):
    code_dir: str | None = Field(default=None, max_length=4096)
    boot_file: str | None = Field(default=None, max_length=4096)
    command: str | None = Field(default=None, max_length=8192)
    parameters: list[Parameter] = Field(default_factory=list, max_length=500)
    inputs: list[InputChannel] = Field(default_factory=list, max_length=100)
    outputs: list[OutputChannel] = Field(default_factory=list, max_length=100)
    engine: specs.Engine | None = None
    #: whether a job may add parameters of its own (None: yes)
    parameters_customization: bool | None = None

    @model_validator(mode="after")
    def _check(self) -> JobConfig:
        if bool(self.code_dir) != bool(self.boot_file):
            raise ValueError("job_config.code_dir and job_config.boot_file go together")
        if not self.code_dir and not self.command:
            raise ValueError("job_config needs code_dir + boot_file, or command")
        _unique("parameter", [p.name for p in self.parameters])
        _unique("channel", [c.name for c in self.inputs] + [c.name for c in self.outputs])
        for p in self.parameters:
            if p.value != "" and p.constraint is not None:
                problem = violation(p.value, p.constraint)
                if problem:
                    raise ValueError(f"parameter '{p.name}': its default {problem}")
        return self


class ResourceRequirement(specs.Model):
    key: Literal["flavor_type", "device_distributed_mode", "host_distributed_mode"]
    #: the request's `values` (the response names them `value`)
    values: list[str] = Field(default_factory=list, max_length=10)
    operator: Literal["in"] = "in"

    @model_validator(mode="before")
    @classmethod
    def _value(cls, v: Any) -> Any:
        if isinstance(v, dict) and "values" not in v and "value" in v:
            return {**v, "values": v["value"]}
        return v


class AdvancedConfig(specs.Model):
    auto_search: search_spec.AutoSearch | None = None


class Metadata(specs.Model):
    name: specs.Name
    description: str = Field(default="", max_length=256)
    workspace_id: str = Field(default="0", max_length=64)
    ai_project: str | None = Field(default=None, max_length=64)

    @field_validator("description", mode="before")
    @classmethod
    def _desc(cls, v: Any) -> Any:
        return "" if v is None else v


class AlgorithmBody(specs.Model):
    """The body of `POST` and `PUT /v2/{project_id}/algorithms[/{id}]`."""

    metadata: Metadata
    job_config: JobConfig
    resource_requirements: list[ResourceRequirement] = Field(default_factory=list,
                                                             max_length=10)
    advanced_config: AdvancedConfig | None = None

    @model_validator(mode="after")
    def _search(self) -> AlgorithmBody:
        auto = self.advanced_config.auto_search if self.advanced_config else None
        if auto is not None and auto.reward_attrs and auto.search_params \
                and auto.algo_configs:
            search_spec.check(auto.model_dump(exclude_none=True))
        return self


def _unique(what: str, names: list[str]) -> None:
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"duplicate {what} names: {', '.join(dup)}")


def _number(value: str, what: str) -> float:
    try:
        x = float(value)
    except ValueError:
        raise ValueError(f"{what}: '{value}' is not a number") from None
    if not math.isfinite(x):
        raise ValueError(f"{what}: '{value}' is not a finite number")
    return x


def violation(value: str, c: Constraint) -> str | None:
    """What is wrong with `value` under constraint `c` ("is not an Integer"), or None."""
    if c.type == "Integer" and not specs.INT_RE.match(value.strip()):
        return f"'{value}' is not an Integer"
    if c.type == "Float":
        try:
            _number(value, "value")
        except ValueError:
            return f"'{value}' is not a Float"
    if c.type == "Boolean" and value.lower() not in ("true", "false"):
        return f"'{value}' is not a Boolean (true or false)"
    if c.valid_type == "Range":
        try:
            x = _number(value, "value")
        except ValueError:
            return f"'{value}' is not a number in [{c.valid_range[0]}, {c.valid_range[1]}]"
        low, high = (float(b) for b in c.valid_range)
        if not low <= x <= high:
            return f"{value} is outside [{c.valid_range[0]}, {c.valid_range[1]}]"
    if c.valid_type == "Enumeration" and value not in c.valid_range:
        return f"'{value}' is not one of {', '.join(c.valid_range)}"
    return None


# --- making a job's algorithm of one --------------------------------------------------------


def apply(algorithm_id: str, body: AlgorithmBody, job: specs.Algorithm) -> specs.Algorithm:
    """The algorithm a job made from `body` runs: its code, boot file, command and
    engine; its parameters' defaults with the job's values where the constraints allow;
    its channels with the job's URLs. errors.BadParameter says what the job got wrong."""
    given = [f for f in ("code_dir", "boot_file", "command", "subscription_id",
                         "item_version_id") if getattr(job, f)]
    if job.engine is not None and job.engine.model_dump(exclude_none=True):
        given.append("engine")
    name = body.metadata.name
    if given:
        raise errors.BadParameter(
            f"algorithm.{given[0]}: a job made from algorithm '{name}' takes its code, boot "
            "file, command and engine from it; leave them out")
    if job.name and job.name != name:
        raise errors.BadParameter(f"algorithm.name: '{job.name}' is not the name of "
                                  f"algorithm {algorithm_id} ('{name}'); leave it out")
    cfg = body.job_config
    merged = job.model_copy(deep=True, update={
        "id": algorithm_id, "name": name, "code_dir": cfg.code_dir,
        "boot_file": cfg.boot_file, "command": cfg.command,
        "engine": cfg.engine.model_copy() if cfg.engine else None,
        "parameters": parameters(name, cfg, job.parameters),
        "inputs": _inputs(name, cfg, job.inputs), "outputs": _outputs(name, cfg, job.outputs),
    })
    auto = body.advanced_config.auto_search if body.advanced_config else None
    if auto is not None and merged.policies and "auto_search" in merged.policies:
        merged.policies = {**merged.policies, "auto_search": search_policy(
            auto, merged.policies["auto_search"])}
    return specs.Algorithm.model_validate(merged.model_dump(exclude_none=True))


def parameters(name: str, cfg: JobConfig,
               overrides: list[specs.Parameter]) -> list[specs.Parameter]:
    """The algorithm's parameters with the job's values; the job's own after them where
    `parameters_customization` allows. An empty value not required is left out."""
    given = {p.name: p for p in overrides}
    out: list[specs.Parameter] = []
    for p in cfg.parameters:
        c = p.constraint or Constraint()
        job_p = given.pop(p.name, None)
        value = p.value if job_p is None else job_p.value
        if job_p is not None and c.editable is False and value != p.value:
            raise errors.BadParameter(f"parameter '{p.name}' of algorithm '{name}' is not "
                                      f"editable: it is {p.value!r}")
        if value == "":
            if c.required:
                raise errors.BadParameter(f"parameter '{p.name}' of algorithm '{name}' is "
                                          "required: give it a value")
            continue
        problem = violation(value, c)
        if problem:
            raise errors.BadParameter(f"parameter '{p.name}' of algorithm '{name}': {problem}")
        out.append(specs.Parameter(
            name=p.name, value=value, description=p.description,
            constraint=p.constraint.model_dump(exclude_none=True) if p.constraint else None,
            i18n_description=p.i18n_description))
    if given and cfg.parameters_customization is False:
        raise errors.BadParameter(
            f"parameter '{next(iter(given))}': algorithm '{name}' has no such parameter and "
            "allows none of a job's own (parameters_customization is false)")
    return out + list(given.values())


def _inputs(name: str, cfg: JobConfig, given: list[specs.Input]) -> list[specs.Input]:
    by_name = {ch.name: ch for ch in given}
    _undeclared("input", name, by_name, [c.name for c in cfg.inputs])
    out = []
    for ch in cfg.inputs:
        job_ch = by_name.get(ch.name)
        if job_ch is None:
            raise errors.BadParameter(f"input '{ch.name}' of algorithm '{name}': give its "
                                      "data (algorithm.inputs[].remote.obs.obs_url, or "
                                      "remote.dataset)")
        if not ch.takes(job_ch):
            what, wanted = (("a dataset version", "paths or URLs (remote.obs)")
                             if job_ch.dataset is not None else
                             ("a path or URL", "dataset versions (remote.dataset)"))
            raise errors.BadParameter(f"input '{ch.name}' of algorithm '{name}' takes "
                                      f"{wanted} only, and the job gives {what}")
        out.append(job_ch.model_copy(update={
            "description": job_ch.description or ch.description,
            # (a dataset's attributes do not apply to a path; the job's shape has them as
            # one string)
            "remote_constraint": job_ch.remote_constraint or [
                {"data_type": c.data_type} for c in ch.remote_constraints if c.data_type]
            or None}))
    return out


def _outputs(name: str, cfg: JobConfig, given: list[specs.Output]) -> list[specs.Output]:
    by_name = {ch.name: ch for ch in given}
    _undeclared("output", name, by_name, [c.name for c in cfg.outputs])
    out = []
    for ch in cfg.outputs:
        job_ch = by_name.get(ch.name)
        if job_ch is None:
            raise errors.BadParameter(f"output '{ch.name}' of algorithm '{name}': say where "
                                      "it goes (algorithm.outputs[].remote.obs.obs_url)")
        out.append(job_ch.model_copy(update={
            "description": job_ch.description or ch.description}))
    return out


def _undeclared(what: str, name: str, given: dict[str, Any], declared: list[str]) -> None:
    extra = [n for n in given if n not in declared]
    if extra:
        has = ", ".join(declared) or "none"
        raise errors.BadParameter(f"{what} '{extra[0]}': algorithm '{name}' has no such "
                                  f"{what} channel (it has {has})")


def search_policy(auto: search_spec.AutoSearch, job_policy: Any) -> Any:
    """A job's auto_search policy with what it leaves empty taken from the algorithm's
    (`advanced_config.auto_search`)."""
    if not isinstance(job_policy, dict):
        return job_policy
    mine = auto.model_dump(exclude_none=True)
    return {**mine, **{k: v for k, v in job_policy.items() if v not in (None, [], "", {})}}


def check_resources(name: str, needs: list[ResourceRequirement], *, gpu: int,
                    node_count: int) -> None:
    """The job's flavor and node count meet the algorithm's `resource_requirements`."""
    have = {"flavor_type": "GPU" if gpu else "CPU",
            "device_distributed_mode": "multiple" if gpu > 1 else "singular",
            "host_distributed_mode": "multiple" if node_count > 1 else "singular"}
    for need in needs:
        allowed = set(need.values)
        if need.key != "flavor_type" and "multiple" in allowed:
            allowed.add("singular")  # one device (or node) is fine for a multiple one
        if allowed and have[need.key] not in allowed:
            raise errors.BadParameter(
                f"algorithm '{name}' needs {need.key} in {', '.join(need.values)}; the job's "
                f"flavor and node count give {have[need.key]}")
