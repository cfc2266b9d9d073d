"""Reading a job file: a ModelArts create body in JSON or YAML, ready to send to a server.

`corral submit` sends one and `corral demo` sends the example's, so this lives apart from
both. The file's relative local paths are made absolute here, on the client, because the
server runs elsewhere and would read them against its own working directory.

A key the create body has no field for is refused here, with its path and the key that was
likely meant: the REST API ignores unknown keys, as ModelArts does, so a misspelt
`flavour_id` would otherwise run the job on the default flavor. The keys are those of
`domain.specs.JobCreate`, walked field by field, so they never drift from what the server
reads.
"""

from __future__ import annotations

import copy
import difflib
import json
import os
import pathlib
import re
import types
import typing
from collections.abc import Iterator
from typing import Any, TypeGuard

import pydantic
import yaml

from corral.cli import render
from corral.domain import specs

#: how ModelArts-style tasks are named; every job has at least this one
FIRST_TASK = "worker-0"
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def load_job_file(file: pathlib.Path) -> dict[str, Any]:
    """The create body in `file`, with its relative local paths made absolute."""
    return resolve_paths(load_body(file, specs.JobCreate), file.absolute().parent)


def load_body(file: pathlib.Path, model: type[pydantic.BaseModel],
              what: str = "a ModelArts training-job body") -> dict[str, Any]:
    """The body of `model` in `file` (JSON or YAML), refused with the keys it does not
    know."""
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise render.Failure(f"{file}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise render.Failure(f"{file}: cannot read it: {render.one_line(exc)}") from None
    body = _parse(file, text)
    if not isinstance(body, dict):
        raise render.Failure(f"{file}: expected a mapping ({what})")
    unknown = unknown_keys(body, model)
    if unknown:
        keys = "unknown key" + ("s " if len(unknown) > 1 else " ")
        raise render.Failure(f"{file}: {keys}{'; '.join(unknown)}")
    return body


def _parse(file: pathlib.Path, text: str) -> Any:
    try:
        if file.suffix.lower() == ".json":
            return json.loads(text)
        return yaml.safe_load(text)  # YAML also reads JSON, whatever the file is called
    except json.JSONDecodeError as exc:
        raise render.Failure(
            f"{file}: not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from None
    except yaml.YAMLError as exc:
        raise render.Failure(f"{file}: not valid YAML: {_yaml_problem(exc)}") from None
    except RecursionError:
        raise too_deep(file) from None


def too_deep(file: pathlib.Path) -> render.Failure:
    """A file nested deeper than the parsers go (they recurse): no job file is."""
    return render.Failure(f"{file}: its lists or mappings nest too deep to be read")


def _yaml_problem(exc: yaml.YAMLError) -> str:
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        return f"{exc.problem} (line {mark.line + 1}, column {mark.column + 1})"
    return render.one_line(exc)


def unknown_keys(body: dict[str, Any],
                 model: type[pydantic.BaseModel] = specs.JobCreate) -> list[str]:
    """Each key of `body` that `model` has no field for, by its path, with the key likely
    meant: `spec.resource.flavour_id (did you mean flavor_id?)`."""
    return list(_model_keys(body, model, ""))


def _model_keys(value: Any, model: type[pydantic.BaseModel], path: str) -> Iterator[str]:
    if not isinstance(value, dict):
        return  # not the shape the model wants: the server's validation says what is wrong
    fields = _fields(model)
    for key, item in value.items():
        where = f"{path}.{key}" if path else str(key)
        if str(key) in fields:
            yield from _value_keys(item, fields[str(key)], where)
        elif model.model_config.get("extra") != "allow":
            yield _unknown(where, str(key), fields)


def _value_keys(value: Any, annotation: Any, path: str) -> Iterator[str]:
    """The unknown keys in `value`, a field's value of type `annotation`."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        yield from _value_keys(value, args[0], path)
    elif origin in (typing.Union, types.UnionType):
        # `X | None`: the alternative of the value's shape (a mapping for a model, ...)
        shaped = [a for a in args if _shape(a) is type(value)]
        if len(shaped) == 1:
            yield from _value_keys(value, shaped[0], path)
    elif isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel):
        yield from _model_keys(value, annotation, path)
    elif origin is list and args and isinstance(value, list):
        for i, item in enumerate(value):
            yield from _value_keys(item, args[0], f"{path}[{i}]")
    elif origin is dict and len(args) == 2 and isinstance(value, dict):
        for key, item in value.items():
            yield from _value_keys(item, args[1], f"{path}.{key}")


def _shape(annotation: Any) -> type | None:
    """The JSON shape (dict or list) a value of `annotation` has, if it is one of those."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _shape(typing.get_args(annotation)[0])
    if origin in (dict, list):
        return typing.cast(type, origin)
    if isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel):
        return dict
    return None


def _fields(model: type[pydantic.BaseModel]) -> dict[str, Any]:
    """The keys a body of `model` may hold (field names and aliases) and their types."""
    config = model.model_config
    by_name = config.get("populate_by_name") or config.get("validate_by_name")
    by_alias = config.get("validate_by_alias", True)
    keys: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        aliases = [a for a in (field.alias, field.validation_alias) if isinstance(a, str)]
        if isinstance(field.validation_alias, pydantic.AliasChoices):
            aliases += [a for a in field.validation_alias.choices if isinstance(a, str)]
        names = ([name] if by_name or not aliases else []) + (aliases if by_alias else [])
        keys.update(dict.fromkeys(names, field.annotation))
    return keys


def _unknown(path: str, key: str, known: dict[str, Any]) -> str:
    likely = difflib.get_close_matches(key, list(known), n=1)
    if likely:
        return f"{path} (did you mean {likely[0]}?)"
    return f"{path} (known there: {', '.join(sorted(known))})"


def resolve_paths(body: dict[str, Any], base: pathlib.Path) -> dict[str, Any]:
    """A copy of `body` whose relative local paths are absolute, taken from `base`.

    The server runs elsewhere (another cwd at least), so a path relative to the job file
    would mean nothing to it. URLs (s3://, obs://, file://) and absolute paths stay as they are.
    """
    body = copy.deepcopy(body)
    algo = body.get("algorithm")
    if isinstance(algo, dict):
        code_dir = algo.get("code_dir")
        if _is_local(code_dir):
            algo["code_dir"] = code_dir = _absolute(code_dir, base)
        boot = algo.get("boot_file")
        # ModelArts names the boot file by its full path; a relative one lies in code_dir
        # (a remote code_dir is the server's to resolve).
        if _is_local(boot) and (not code_dir or _is_local(code_dir)):
            algo["boot_file"] = _absolute(boot, pathlib.Path(code_dir) if code_dir else base)
        for key in ("inputs", "outputs"):
            for channel in algo.get(key) or []:
                obs = dig(channel, "remote", "obs")
                if obs is not None and _is_local(obs.get("obs_url")):
                    obs["obs_url"] = _absolute(obs["obs_url"], base)
        pfs = dig(algo, "summary", "log_dir", "pfs")  # a folder of an output channel
        if pfs is not None and _is_local(pfs.get("pfs_path")):
            pfs["pfs_path"] = _absolute(pfs["pfs_path"], base)
    log_path = dig(body, "spec", "log_export_path")
    if log_path is not None and _is_local(log_path.get("host_path")):
        log_path["host_path"] = _absolute(log_path["host_path"], base)
    return body


def dig(d: Any, *keys: str) -> dict[str, Any] | None:
    """The mapping at `d[key][key]...`, or None where a step is missing or not a mapping."""
    for key in keys:
        if not isinstance(d, dict):
            return None
        d = d.get(key)
    return d if isinstance(d, dict) else None


def _is_local(value: object) -> TypeGuard[str]:
    return isinstance(value, str) and bool(value) and not _SCHEME.match(value)


def _absolute(value: str, base: pathlib.Path) -> str:
    path = os.path.normpath(base / pathlib.Path(value).expanduser())
    # A trailing slash says "a folder" to ModelArts tools; keep it.
    return path + "/" if value.endswith("/") and not path.endswith("/") else path
