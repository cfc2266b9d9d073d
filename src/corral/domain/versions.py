"""Versions of a training job: how a new one is made from an earlier one.

A job is a family of versions, V0001 being the job as first submitted. A new version starts
from any earlier one with changes (parameters, inputs, outputs, code, flavor, ...) and is a
training job of its own, with its own id, attempts, logs and phase; the family gives it its
name and number. Versions after the first write each output channel to `<folder>/V000N`
under the folder the first version wrote to, unless the new version names the channel's
URL itself.
"""

from __future__ import annotations

import copy
import os
import re
from typing import Annotated, Any

from pydantic import Field, field_validator

from corral.domain import errors, specs

#: a version by name or number: V0003, v3, 3 (as JSON Schema writes patterns)
VERSION_PATTERN = r"^[Vv]?0*[1-9][0-9]{0,8}$"
VERSION_RE = re.compile(r"^[Vv]?0*([1-9][0-9]{0,8})\Z")
#: a version named in a request (a path, a body), checked as `parse` reads it
VersionRef = Annotated[str, specs.Pattern(VERSION_PATTERN,
                                          "a version is V0001, V0002, ... or its number")]
#: set in a version that resumes from an earlier one: the earlier version's name
RESUME_ENV = "CORRAL_RESUME_FROM"


def name(number: int) -> str:
    return f"V{number:04d}"


def parse(value: str | int) -> int:
    """A version number from `V0003`, `v3`, `3` or 3."""
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= specs.MAX_COUNT:
        return value
    m = VERSION_RE.match(str(value).strip())
    if not m:
        raise errors.BadParameter(f"'{value}' is not a version (V0001, V0002, ...)")
    return int(m.group(1))


class ResourceChanges(specs.Model):
    flavor_id: str | None = None
    node_count: int | None = Field(default=None, ge=1, le=1024)


class SpecChanges(specs.Model):
    resource: ResourceChanges = Field(default_factory=ResourceChanges)
    log_export_path: specs.LogExportPath | None = None


class AlgorithmChanges(specs.Model):
    code_dir: str | None = None
    boot_file: str | None = None
    command: str | None = None
    working_dir: str | None = None
    engine: specs.Engine | None = None
    #: merged by name into the earlier version's
    parameters: list[specs.Parameter] = Field(default_factory=list)
    #: merged by channel name
    inputs: list[specs.Input] = Field(default_factory=list)
    outputs: list[specs.Output] = Field(default_factory=list)
    #: merged by variable name
    environments: dict[str, str] = Field(default_factory=dict)

    @field_validator("environments", mode="before")
    @classmethod
    def _env(cls, v: Any) -> Any:
        return {k: specs.scalar_str(x) for k, x in v.items()} if isinstance(v, dict) else v


class VersionCreate(specs.Model):
    """The body of `POST /v2/{project_id}/training-jobs/{id}/versions`."""

    #: the version to start from (V0002, 2); by default the one whose id is in the URL
    from_version: VersionRef | specs.Ordinal | None = None
    description: str | None = Field(default=None, max_length=256)
    #: start from the earlier version's outputs and checkpoints (copied into this one's)
    resume: bool = False
    algorithm: AlgorithmChanges = Field(default_factory=AlgorithmChanges)
    spec: SpecChanges = Field(default_factory=SpecChanges)
    #: merged into the earlier version's annotations
    annotations: dict[str, str] = Field(default_factory=dict)
    #: parameters of the earlier version to leave out
    remove_parameters: list[str] = Field(default_factory=list)

    @field_validator("annotations", mode="before")
    @classmethod
    def _ann(cls, v: Any) -> Any:
        return {k: specs.scalar_str(x) for k, x in v.items()} if isinstance(v, dict) else v


def derive(parent: dict[str, Any], changes: VersionCreate, number: int,
           bases: dict[str, str], parent_number: int = 1,
           ) -> tuple[dict[str, Any], dict[str, str]]:
    """The create body of version `number` from the earlier version's stored spec, and the
    output folders its own later versions build on."""
    body = _fresh(parent)
    alg, ch = body["algorithm"], changes.algorithm
    _change_code(alg, ch)
    alg["parameters"] = _parameters(alg.get("parameters", []), ch.parameters,
                                    changes.remove_parameters)
    alg["inputs"] = _merge(alg.get("inputs", []), ch.inputs)
    env = {k: v for k, v in alg.get("environments", {}).items() if k != RESUME_ENV}
    alg["environments"] = {**env, **ch.environments}
    if changes.resume:
        alg["environments"][RESUME_ENV] = name(parent_number)
    alg["outputs"], new_bases = _outputs(alg.get("outputs", []), ch.outputs, bases, number)
    _change_spec(body["spec"], changes.spec)
    meta = body["metadata"]
    meta["annotations"] = {**meta.get("annotations", {}), **changes.annotations}
    if changes.description is not None:
        meta["description"] = changes.description
    return body, new_bases


def _change_code(alg: dict[str, Any], ch: AlgorithmChanges) -> None:
    """The code, command and engine changes (an empty string clears a field)."""
    old_code = alg.get("code_dir")
    for key in ("code_dir", "boot_file", "command", "working_dir"):
        value = getattr(ch, key)
        if value is not None:
            alg[key] = value or None
    if ch.code_dir and not ch.boot_file and old_code and alg.get("boot_file"):
        alg["boot_file"] = _rebase(alg["boot_file"], old_code, ch.code_dir)
    if ch.engine is not None:
        alg["engine"] = ch.engine.model_dump(exclude_none=True)


def _parameters(old: list[dict[str, Any]], new: list[specs.Parameter],
                remove: list[str]) -> list[dict[str, Any]]:
    """The earlier version's parameters less `remove`, with `new` merged in by name."""
    unknown = set(remove) - {p["name"] for p in old}
    if unknown:
        raise errors.BadParameter(f"remove_parameters: no parameter {sorted(unknown)[0]!r}")
    params = {p["name"]: p for p in old if p["name"] not in remove}
    for p in new:
        params[p.name] = p.model_dump(exclude_none=True)
    return list(params.values())


def _outputs(old: list[dict[str, Any]], new: list[specs.Output], bases: dict[str, str],
             number: int) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The output channels of version `number`, and the folder each one's versions go
    under: a channel kept from the earlier version writes to its folder's `V000N`, one
    given anew writes where it says."""
    given = {o.name for o in new}
    outputs, new_bases = [], {}
    for out in old:
        if out["name"] in given:
            continue
        base = bases.get(out["name"]) or out["remote"]["obs"]["obs_url"]
        out["remote"] = {"obs": {"obs_url": version_url(base, number)}}
        outputs.append(out)
        new_bases[out["name"]] = base
    for o in new:
        outputs.append(o.model_dump(exclude_none=True))
        new_bases[o.name] = o.url
    return outputs, new_bases


def _change_spec(spec: dict[str, Any], changes: SpecChanges) -> None:
    res = spec.setdefault("resource", {})
    if changes.resource.flavor_id is not None:
        res["flavor_id"] = changes.resource.flavor_id
    if changes.resource.node_count is not None:
        res["node_count"] = changes.resource.node_count
    if changes.log_export_path is not None:
        spec["log_export_path"] = changes.log_export_path.model_dump(exclude_none=True)


def version_url(base: str, number: int) -> str:
    return base.rstrip("/") + "/" + name(number)


def _fresh(parent: dict[str, Any]) -> dict[str, Any]:
    """The stored (normalized) spec as a create body again: what submit filled in goes."""
    body = copy.deepcopy(parent)
    alg = body["algorithm"]
    alg.pop("local_code_dir", None)
    for key in ("inputs", "outputs"):
        for chan in alg.get(key, []):
            chan.pop("local_dir", None)
    params = alg.get("parameters", [])
    alg["parameters"] = [p for p in params if not p.get("description", "").startswith(
        specs.MODEL_PARAMETER_NOTE)]
    body.get("spec", {}).get("resource", {}).pop("flavor_name", None)
    return body


def _merge(old: list[dict[str, Any]], new: list[specs.Input]) -> list[dict[str, Any]]:
    by_name = {c["name"]: c for c in old}
    for c in new:
        by_name[c.name] = c.model_dump(exclude_none=True)
    return list(by_name.values())


def _rebase(boot: str, old_code: str, new_code: str) -> str:
    """A boot file given by its full path under the old code_dir, under the new one."""
    if boot.startswith(old_code.rstrip("/") + "/"):
        rel = boot[len(old_code.rstrip("/")) + 1:]
        sep = "/" if "://" in new_code else os.sep
        return new_code.rstrip("/") + sep + rel
    return boot
