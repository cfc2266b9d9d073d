"""Reading a job file: a ModelArts create body in JSON or YAML, ready to send to a server.

`corral submit` sends one and `corral demo` sends the example's, so this lives apart from
both. The file's relative local paths are made absolute here, on the client, because the
server runs elsewhere and would read them against its own working directory.
"""

from __future__ import annotations

import copy
import json
import os
import pathlib
import re
from typing import Any, TypeGuard

import yaml

from corral import terminal

#: how ModelArts-style tasks are named; every job has at least this one
FIRST_TASK = "worker-0"
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def load_job_file(file: pathlib.Path) -> dict[str, Any]:
    """The create body in `file`, with its relative local paths made absolute."""
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise terminal.Failure(f"{file}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise terminal.Failure(f"{file}: cannot read it: {terminal.one_line(exc)}") from None
    body = _parse(file, text)
    if not isinstance(body, dict):
        raise terminal.Failure(f"{file}: expected a mapping (a ModelArts training-job body)")
    return resolve_paths(body, file.absolute().parent)


def _parse(file: pathlib.Path, text: str) -> Any:
    if file.suffix.lower() == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise terminal.Failure(
                f"{file}: not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
            ) from None
    try:
        return yaml.safe_load(text)  # YAML also reads JSON, whatever the file is called
    except yaml.YAMLError as exc:
        raise terminal.Failure(f"{file}: not valid YAML: {_yaml_problem(exc)}") from None


def _yaml_problem(exc: yaml.YAMLError) -> str:
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        return f"{exc.problem} (line {mark.line + 1}, column {mark.column + 1})"
    return terminal.one_line(exc)


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
