"""A task run's training job: the task's template with every reference resolved.

Resolution happens when the run is submitted, so that an input `from` an upstream output
channel names the folder that upstream run wrote, and a `metric` parameter its final
value. Each run writes its output channels to folders of its own,
`<base>/<task>/a<attempt>[-<item>]/<channel>`, so that no two runs (of two attempts, two
items, or two pipelines) ever write to the same place: a later run never changes what an
earlier one left for caching or for a rerun to reuse.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Any

from corral.domain import errors, jobs, models, specs
from corral.domain.pipelines import shape, spec

#: a task's job registers no model of its own: the pipeline's `model` is what is saved
NO_MODEL = {models.WHEN_ANNOTATION: "never"}


class MissingValue(errors.CorralError):
    """A reference could not be resolved."""


@dataclasses.dataclass(frozen=True)
class Resolved:
    """What a run was given: recorded with it, and shown."""

    parameters: dict[str, str]
    inputs: dict[str, str]
    outputs: dict[str, str]


def parse(data: Any) -> shape.Shape:
    """A pipeline body validated, its graph and references checked, and each task's
    template checked as the job it will become (with stand-ins for what is only known at
    run time); BadParameter otherwise."""
    body: spec.PipelineCreate = specs.parse(spec.PipelineCreate, data)
    checked = shape.check(body)
    for _key, task, item in checked.runs():
        if item in (None, 0):
            probe(checked, task, item, base="/pipeline")
    return checked


def probe(checked: shape.Shape, task: str, item: int | None, *, base: str,
          name: str = "probe") -> specs.JobCreate:
    """The job task `task` would submit, less the inputs it takes from upstream tasks and
    with stand-ins for their metrics (BadParameter, naming the task, when its template is
    not a valid job)."""
    body, _ = job_body(checked, task, item, attempt=1, base=base, name=name,
                       params=checked.body.parameters, overrides={},
                       output_of=lambda key, channel: f"{base}/{key}/{channel}",
                       metric_of=lambda key, metric: 0.0)
    taken = checked.tasks[task].inputs
    body.algorithm.inputs = [ch for ch in body.algorithm.inputs if ch.name not in taken]
    return body


def job_body(checked: shape.Shape, task: str, item: int | None, *, attempt: int, base: str,
             name: str, params: Mapping[str, str],
             overrides: Mapping[str, Mapping[str, str]],
             output_of: Callable[[str, str], str],
             metric_of: Callable[[str, str], float]) -> tuple[specs.JobCreate, Resolved]:
    """The training job of run `task` (item `item`) in attempt `attempt`, and what it was
    given. `output_of(key, channel)` and `metric_of(key, metric)` read upstream runs
    (MissingValue when they cannot)."""
    t = checked.tasks[task]
    alg = t.task.algorithm
    parameters = _parameters(checked, t, item, params, overrides.get(task, {}), metric_of)
    inputs = {}
    for ch in alg.inputs:
        if ch.name in t.inputs:
            ref = t.inputs[ch.name]
            inputs[ch.name] = output_of(checked.item_of(ref.task, item, ref.item), ref.channel)
        else:
            assert ch.remote is not None and ch.remote.obs is not None
            inputs[ch.name] = ch.remote.obs.obs_url
    outputs = {o.name: output_dir(base, task, attempt, item, o.name) for o in alg.outputs}
    annotations = dict(NO_MODEL)
    if t.task.retries:
        annotations[jobs.RETRY_ANNOTATION] = str(t.task.retries)
    key = shape.run_key(task, item)
    data = {
        "kind": "job",
        "metadata": {"name": name, "annotations": annotations,
                     "description": f"pipeline {checked.body.metadata.name}, task {key}, "
                                    f"attempt {attempt}"[:256]},
        "algorithm": {
            **alg.model_dump(include={"code_dir", "boot_file", "command", "working_dir",
                                      "environments"}, exclude_none=True),
            **({"engine": alg.engine.model_dump(exclude_none=True)} if alg.engine else {}),
            "parameters": [{"name": k, "value": v} for k, v in parameters.items()],
            "inputs": [{"name": k, "remote": {"obs": {"obs_url": v}}} for k, v in inputs.items()],
            "outputs": [{"name": k, "remote": {"obs": {"obs_url": v}}}
                        for k, v in outputs.items()],
        },
        "spec": t.task.spec.model_dump(exclude_none=True),
    }
    try:
        body: specs.JobCreate = specs.parse(specs.JobCreate, data)
    except errors.BadParameter as exc:
        raise errors.BadParameter(f"task '{task}': {exc.message}") from None
    return body, Resolved(parameters=parameters, inputs=inputs, outputs=outputs)


def _parameters(checked: shape.Shape, t: shape.TaskShape, item: int | None,
                params: Mapping[str, str], overrides: Mapping[str, str],
                metric_of: Callable[[str, str], float]) -> dict[str, str]:
    """The run's parameters: the template's resolved, then its item's, then overrides."""
    out: dict[str, str] = {}
    for p in t.task.algorithm.parameters:
        if p.param is not None:
            out[p.name] = params[p.param]
        elif p.name in t.metrics:
            m = t.metrics[p.name]
            out[p.name] = format_number(metric_of(checked.item_of(m.task, item, m.item),
                                                  m.name))
        else:
            out[p.name] = p.value or ""
    if item is not None and t.task.for_each is not None:
        out.update(t.task.for_each[item])
    out.update(overrides)
    return out


def output_dir(base: str, task: str, attempt: int, item: int | None, channel: str) -> str:
    run = f"a{attempt}" if item is None else f"a{attempt}-{item}"
    return f"{base.rstrip('/')}/{task}/{run}/{channel}"


def format_number(value: float) -> str:
    """A metric as a parameter's value: `3` for 3.0, else Python's shortest repr."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def cache_key(body: specs.JobCreate, code_hash: str, input_hashes: Mapping[str, str]) -> str:
    """What makes two runs the same: the job's template (less its name and the places of
    its channels), its parameters, the content of its code and of its inputs."""
    alg = body.algorithm
    data = {
        "template": alg.model_dump(exclude={"parameters", "inputs", "outputs",
                                            "local_code_dir", "code_dir"}, exclude_none=True),
        "spec": body.spec.model_dump(exclude_none=True),
        "annotations": body.metadata.annotations,
        "parameters": [[p.name, p.value] for p in alg.parameters],
        "outputs": sorted(o.name for o in alg.outputs),
        "code": code_hash,
        "inputs": dict(sorted(input_hashes.items())),
    }
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()
