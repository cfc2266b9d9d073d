"""Rules of the model registry: what a job registers when it ends, and names of things.

A training job (kind `job`) that completes registers the content of its model output
channel as a new version of a model. The job says how through annotations:

- `corral/model-name`: the model (default: the job's name)
- `corral/model-channel`: the output channel (default: the `model_channel` setting,
  `train_url`, when the job has it, else its first output channel)
- `corral/register-model`: `on-success` (default), `always` (also when the job failed or
  was stopped), or `never`
"""

from __future__ import annotations

import dataclasses
import re

from corral.domain import errors, jobs, specs

NAME_ANNOTATION = "corral/model-name"
CHANNEL_ANNOTATION = "corral/model-channel"
WHEN_ANNOTATION = "corral/register-model"
WHEN = ("on-success", "always", "never")
ALIAS_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}\Z")
#: aliases that would read as a version number, or as "the latest", are refused
RESERVED_ALIASES = frozenset({"latest"})


@dataclasses.dataclass(frozen=True)
class Registration:
    model: str
    channel: str
    when: str

    def wanted(self, phase: str) -> bool:
        if self.when == "never":
            return False
        return self.when == "always" or phase == jobs.Phase.COMPLETED.value


def registration(spec: specs.JobCreate, default_channel: str) -> Registration | None:
    """What the job registers when it ends, or None (no output channel, not a training
    job, or asked not to). Raises BadParameter for annotations that make no sense."""
    ann = spec.metadata.annotations
    when = ann.get(WHEN_ANNOTATION, "on-success")
    if when not in WHEN:
        raise errors.BadParameter(f"annotation {WHEN_ANNOTATION} must be one of {list(WHEN)}")
    model = ann.get(NAME_ANNOTATION, spec.metadata.name)
    if not specs.NAME_RE.match(model):
        raise errors.BadParameter(
            f"annotation {NAME_ANNOTATION}: model names are 1-64 letters, digits, '_' or '-'")
    outputs = [o.name for o in spec.algorithm.outputs]
    channel = ann.get(CHANNEL_ANNOTATION)
    if channel is not None and channel not in outputs:
        raise errors.BadParameter(
            f"annotation {CHANNEL_ANNOTATION}: the job has no output channel '{channel}'")
    if spec.kind != "job" or when == "never" or not outputs:
        return None
    if channel is None:
        channel = default_channel if default_channel in outputs else outputs[0]
    return Registration(model=model, channel=channel, when=when)


def check_alias(alias: str) -> str:
    if not ALIAS_RE.match(alias) or alias in RESERVED_ALIASES:
        raise errors.BadParameter(
            f"alias '{alias}': aliases start with a letter, hold letters, digits, '_' or '-' "
            "(at most 64), and 'latest' is reserved")
    return alias
