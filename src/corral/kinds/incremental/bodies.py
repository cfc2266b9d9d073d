"""The training jobs a loop submits, made from its templates.

Each job is its template (a corral training-job body) with what the loop fills in: its
name (the loop's and the job's role), its kind and model, the channels that carry its data
and model, and Sedna's environment variables, so that Sedna-style worker scripts run
unchanged while corral-style ones get their usual `--name=value` arguments:

- train: `--data_url` (the round's training samples), `--train_url` (where to write the
  model) and `--model_url` (the current model); BASE_MODEL_URL, MODEL_URL,
  TRAIN_DATASET_URL.
- eval: `--data_url` (the frozen evaluation set) and `--model_url` (the new model);
  MODEL_URLS (new;current), TEST_DATASET_URL.
- serve: `--model_url` (the model it starts with), `--deploy_url` (the deploy folder it
  follows: model_config.json and the models deployed to it) and `--service_url` (its own
  folder, where it acknowledges models and writes hard examples); MODEL_URL,
  MODEL_HOT_UPDATE, MODEL_POLL_PERIOD_SECONDS, MODEL_HOT_UPDATE_CONFIG,
  MODEL_HOT_UPDATE_ACK and, with hard-example mining, HEM_NAME, HEM_PARAMETERS,
  HARD_EXAMPLES_FILE, HE_SAVED_URL. Its template's `spec.nodeName` (Sedna's) pins it to
  that node of its pool.

Paths under an outputDir in object storage are the channels' local copies by the time
the job reads them (`scheduler.launching.local_copies`).

Every job also gets DATASET_URL (the dataset's index file), IL_JOB_NAME and, in a round,
IL_ROUND. The train job's `train_url` output is registered as the next version of the
loop's model when it completes, as any corral job's model output is.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from corral.domain import models, specs
from corral.domain.incremental import loopspec
from corral.kinds.incremental import current, layout
from corral.store import kind_rows

DATA = "data_url"
MODEL_OUT = "train_url"
MODEL_IN = "model_url"
#: the service's own output: where it acknowledges models and writes hard examples
SERVICE_OUT = "service_url"
#: the deploy folder, which the service follows (an input channel)
DEPLOY_IN = "deploy_url"
#: seconds between uploads of the service's output channel in object storage
SERVICE_PERIOD = "2"


def _template(template: dict[str, object]) -> specs.JobCreate:
    return loopspec.job_body(template, "il")  # the name is the role's (kinds.owned)


def _input(alg: specs.Algorithm, name: str, url: str, **more: object) -> None:
    alg.inputs = [c for c in alg.inputs if c.name != name] + [specs.Input.model_validate(
        {"name": name, "remote": {"obs": {"obs_url": url}}, **more})]


def _output(alg: specs.Algorithm, name: str, url: str, **more: object) -> None:
    alg.outputs = [c for c in alg.outputs if c.name != name] + [specs.Output.model_validate(
        {"name": name, "remote": {"obs": {"obs_url": url}}, **more})]


def _done(body: specs.JobCreate) -> specs.JobCreate:
    """The body validated again, whole (what the loop filled in with the template)."""
    try:
        return specs.JobCreate.model_validate(body.model_dump(exclude_none=True))
    except ValueError as exc:
        raise ValueError(specs.describe(exc)) from None


def _env(body: specs.JobCreate, loop: kind_rows.Loop, dataset: kind_rows.Dataset,
         number: int | None, values: dict[str, str]) -> None:
    env = body.algorithm.environments
    env.update(values)
    env.update({"DATASET_URL": dataset.url, "IL_JOB_NAME": loop.name})
    if number is not None:
        env["IL_ROUND"] = str(number)


def train(spec: loopspec.LoopSpec, loop: kind_rows.Loop, where: layout.Layout, number: int,
          base: current.ModelAt, dataset: kind_rows.Dataset) -> specs.JobCreate:
    body = _template(spec.trainSpec.template)
    body.kind = "job"
    body.model = specs.ModelRef(name=base.name, version=base.version)
    index, out = where.train_index(number, dataset.format), where.model_dir(number)
    _input(body.algorithm, DATA, index)
    _output(body.algorithm, MODEL_OUT, out)
    body.metadata.annotations.update({models.NAME_ANNOTATION: spec.model_name,
                                      models.CHANNEL_ANNOTATION: MODEL_OUT,
                                      models.WHEN_ANNOTATION: "on-success"})
    _env(body, loop, dataset, number, {"BASE_MODEL_URL": base.location,
                                       "MODEL_URL": out, "TRAIN_DATASET_URL": index})
    return _done(body)


def evaluation(spec: loopspec.LoopSpec, loop: kind_rows.Loop, where: layout.Layout, number: int,
               new: current.ModelAt, now: current.ModelAt,
               dataset: kind_rows.Dataset) -> specs.JobCreate:
    body = _template(spec.evalSpec.template)
    body.kind = "evaluation"
    body.model = specs.ModelRef(name=new.name, version=new.version)
    body.baseline_model = specs.ModelRef(name=now.name, version=now.version)
    index = where.eval_index(number, dataset.format)
    _input(body.algorithm, DATA, index)
    body.metadata.annotations[models.WHEN_ANNOTATION] = "never"
    _env(body, loop, dataset, number, {"MODEL_URLS": f"{new.location};{now.location}",
                                       "TEST_DATASET_URL": index})
    return _done(body)


def service(spec: loopspec.LoopSpec, loop: kind_rows.Loop, where: layout.Layout,
            model_dir: str, dataset: kind_rows.Dataset) -> specs.JobCreate:
    assert spec.deploySpec.template is not None
    body = _template(spec.deploySpec.template)
    body.kind = "job"
    alg = body.algorithm
    alg.parameters = [p for p in alg.parameters if p.name != MODEL_IN] + [
        specs.Parameter(name=MODEL_IN, value=model_dir)]
    _input(alg, DEPLOY_IN, where.deploy_dir, follow=True)
    _output(alg, SERVICE_OUT, where.service_dir,
            **({"period": SERVICE_PERIOD} if where.remote else {}))
    body.metadata.annotations[models.WHEN_ANNOTATION] = "never"
    dm = spec.deploySpec.model
    values = {"MODEL_URL": model_dir,
              "MODEL_HOT_UPDATE": "true" if dm.hotUpdateEnabled else "false",
              "MODEL_POLL_PERIOD_SECONDS": str(dm.pollPeriodSeconds),
              "MODEL_HOT_UPDATE_CONFIG": where.config,
              "MODEL_HOT_UPDATE_ACK": where.ack}
    hem = spec.deploySpec.hardExampleMining
    if hem is not None:
        values.update({"HEM_NAME": hem.name,
                       "HEM_PARAMETERS": json.dumps({p.key: p.value for p in hem.parameters}),
                       "HARD_EXAMPLES_FILE": where.hard_examples,
                       "HE_SAVED_URL": where.hard_examples_dir})
    _env(body, loop, dataset, None, values)
    return _done(body)


def check(spec: loopspec.LoopSpec, loop: kind_rows.Loop, dataset: kind_rows.Dataset,
          each: Callable[[specs.JobCreate], object] = lambda _body: None) -> None:
    """Build every job the loop would submit, so that a template that cannot make one is
    refused when the loop is made rather than in its first round (ValueError). `each` is
    given every body as far as it is known before any round (without the round's samples;
    the loop's initial model for a model the round makes) and may refuse it too: submitted
    as a probe (`owned.probe`), for an unknown flavor or a code_dir that does not exist."""
    where = layout.Layout(spec.outputDir.rstrip("/"))
    model = current.ModelAt(name=spec.model_name, version=1, location=where.model_dir(1))
    initial = specs.ModelRef(name=loop.initial_model, version=loop.initial_version)
    bodies = [train(spec, loop, where, 1, model, dataset),
              evaluation(spec, loop, where, 1, model, model, dataset)]
    if spec.deploySpec.template is not None:
        bodies.append(service(spec, loop, where, where.deployed(model.name, 1), dataset))
    for body in bodies:
        body.algorithm.inputs = [c for c in body.algorithm.inputs
                                 if c.name not in (DATA, DEPLOY_IN)]
        if body.model is not None:
            body.model = initial.model_copy()
        if body.baseline_model is not None:
            body.baseline_model = initial.model_copy()
        each(body)
