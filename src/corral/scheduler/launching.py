"""How a job's spec becomes the processes of one attempt: argv, environment and paths.

Parameters become `--name=value`, every input and output channel `--<name>=<dir>` (as on
ModelArts); corral adds its own variables and the distributed-training ones.
"""

from __future__ import annotations

import functools
import os
import pathlib
import re
import secrets
import shlex
import shutil
import socket
from collections.abc import Callable, Mapping, Sequence

from corral import settings as settings_mod
from corral.domain import (
    containers,
    distributed,
    errors,
    faultspec,
    jobfields,
    metrics,
    resources,
    specs,
)
from corral.executors import base
from corral.oskit import beneath
from corral.scheduler import images
from corral.services import catalog as catalog_mod
from corral.services import jobpaths
from corral.storage import envs as storage_envs
from corral.storage import objects, runs
from corral.storage import paths as storage_paths  # `paths` names a job's RunPaths here

#: variables of the server's own environment that never reach a job: corral's own settings
#: (the server key among them) always, and by default the usual cloud and database
#: credentials (`job_env_deny` in the settings); a job gets only its own `environments`
#: and corral's per-task variables on top
PRIVATE_ENV_PREFIXES = ("CORRAL_",)


def new_launch_id() -> str:
    return secrets.token_hex(8)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def job_args(alg: specs.Algorithm) -> list[str]:
    copy = local_copies(alg)
    args = [f"--{p.name}={copy(p.value)}" for p in alg.parameters]
    args += [f"--{c.name}={c.local_dir or c.url}" for c in alg.inputs]
    args += [f"--{c.name}={c.local_dir or c.url}" for c in alg.outputs]
    return args


def local_copies(alg: specs.Algorithm) -> Callable[[str], str]:
    """What turns a value naming a channel in object storage (or a path in it) into one
    naming the channel's local copy, which is what the task reads and writes (a ';' list
    part by part). A channel that is one object is copied into a folder: its URL names
    the file there."""
    channels: list[specs.Input | specs.Output] = [*alg.inputs, *alg.outputs]
    places = []
    for ch in channels:
        if objects.is_remote(ch.url) and ch.local_dir:
            url = ch.url.rstrip("/")
            name = url.rsplit("/", 1)[-1]
            one = isinstance(ch, specs.Input) and _holds_only(ch.local_dir, name)
            places.append((url, os.path.join(ch.local_dir, name) if one else ch.local_dir))
    places.sort(key=lambda p: -len(p[0]))

    def part(value: str) -> str:
        for url, local in places:
            if value == url or value.startswith(url + "/"):
                return local + value[len(url):]
        return value

    def copy(value: str) -> str:
        if not places or not objects.is_remote(value.split(";", 1)[0]):
            return value
        return ";".join(part(v) for v in value.split(";"))

    return copy


def _holds_only(folder: str, name: str) -> bool:
    try:
        return os.listdir(folder) == [name] and os.path.isfile(os.path.join(folder, name))
    except OSError:
        return False


def argv_for(alg: specs.Algorithm, code: pathlib.Path | None,
             engine: settings_mod.EngineConfig) -> tuple[str, ...]:
    """The task's argv; for `command`, a shell command line followed by its arguments."""
    args = job_args(alg)
    if alg.command:
        # The parameters follow the command, as they do for custom images on ModelArts.
        return (alg.command, *args)
    assert code is not None and alg.boot_file is not None
    boot = runs.resolve_boot_file(code, _relative_boot(alg))
    return (engine.python, str(boot), *args)


#: characters that make a command line need a shell (expansions, globs, escapes, comments)
SHELL_CHARS = frozenset("$`\\*?[]{}~#!\n")
#: words a shell treats specially even as a lone command
SHELL_WORDS = frozenset((
    ".", ":", "[", "[[", "alias", "bg", "break", "case", "cd", "command", "continue", "do",
    "done", "elif", "else", "eval", "exec", "exit", "export", "fg", "fi", "for", "function",
    "getopts", "hash", "if", "jobs", "kill", "local", "read", "readonly", "return", "set",
    "shift", "source", "test", "then", "times", "trap", "type", "ulimit", "umask", "unalias",
    "unset", "until", "wait", "while", "echo", "printf", "pwd", "true", "false",
))


def simple_command(command: str, path: str) -> list[str] | None:
    """The words of a command line that a shell would just run as one program, else None.

    Running those words directly saves starting a shell for every task and gives the
    program the signals itself; anything a shell would do more with (operators,
    expansions, globs, assignments, built-ins) keeps going through /bin/sh.
    """
    words = _plain_words(command)
    if words is None or not shutil.which(words[0], path=path):
        return None
    return list(words)


@functools.lru_cache(maxsize=256)
def _plain_words(command: str) -> tuple[str, ...] | None:
    """The words of a command line with nothing a shell would do more with, else None
    (kept per command line: the jobs of a sweep or a retried job share theirs)."""
    if any(c in SHELL_CHARS for c in command):
        return None
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars="();<>|&")
        lexer.whitespace_split = True
        words = tuple(lexer)
    except ValueError:  # unbalanced quotes: let the shell report it
        return None
    if not words or any(w and set(w) <= set("();<>|&") for w in words):
        return None
    if "=" in words[0] or words[0] in SHELL_WORDS:
        return None
    return words


def input_paths(spec: specs.JobCreate) -> tuple[str, ...]:
    """What a task reads at the server's paths: its input channels (those in object
    storage where they were fetched to), the job's model and its baseline model (when the
    model store is a local folder; an `s3://` one is named by its URL)."""
    alg = spec.algorithm
    paths = [c.local_dir or c.url for c in alg.inputs]
    if spec.model is not None:
        paths += [p.value for p in alg.parameters if p.name == "model_url"]
    base = spec.baseline_model
    if base is not None and base.location and not objects.is_remote(base.location):
        paths.append(base.location)
    return tuple(paths)


def _relative_boot(alg: specs.Algorithm) -> str:
    """boot_file relative to code_dir, so it resolves inside the snapshot."""
    assert alg.code_dir and alg.boot_file
    code = runs.local_path(alg.local_code_dir or alg.code_dir, "code_dir")
    boot = runs.resolve_boot_file(code, alg.boot_file)
    return str(boot.relative_to(code))


def base_env(environ: Mapping[str, str],
             deny: Sequence[str] = settings_mod.JOB_ENV_DENY) -> dict[str, str]:
    """The server's environment less what never reaches a job."""
    hidden = (*PRIVATE_ENV_PREFIXES, *deny)
    return {k: v for k, v in environ.items() if not k.upper().startswith(hidden)}


#: the variable that pins a process to its devices, for accelerators with a usual one
#: (others: <NAME>_VISIBLE_DEVICES, or `visible_env` in the settings)
VISIBLE_ENV = {"npu": "ASCEND_RT_VISIBLE_DEVICES"}


def visible_env(name: str, configured: Mapping[str, str] | None = None) -> str:
    """The variable naming the devices of accelerator `name` a task may use."""
    return ((configured or {}).get(name) or VISIBLE_ENV.get(name.lower())
            or re.sub(r"[^A-Z0-9_]", "_", name.upper()) + "_VISIBLE_DEVICES")


def task_env(
    *, inherited: Mapping[str, str], alg: specs.Algorithm, job_id: str, task: str, rank: int,
    world: int, attempt: int, master_port: int, gpu_ids: Sequence[int],
    devices: Mapping[str, Sequence[int]] | None = None,
) -> dict[str, str]:
    """The task's environment. `devices`: variable -> device ids, for every accelerator
    of its node (empty for those it was not given: like CUDA_VISIBLE_DEVICES, it hides
    them)."""
    env = dict(inherited)
    copy = local_copies(alg)
    env.update({k: copy(v) for k, v in alg.environments.items()})
    env.update({
        "CORRAL_JOB_ID": job_id, "CORRAL_TASK_ID": task, "CORRAL_ATTEMPT": str(attempt),
        "MASTER_PORT": str(master_port),
        "CUDA_VISIBLE_DEVICES": ",".join(str(i) for i in gpu_ids),
        "PYTHONUNBUFFERED": "1",
    })
    # Every task on this machine; an executor that runs them elsewhere puts its nodes'
    # addresses instead (the Ray one: executors/ray/payload.py).
    env.update(distributed.rank_env(rank=rank, world=world, gpus=len(gpu_ids)))
    env.update(distributed.address_env([distributed.LOOPBACK] * world, distributed.LOOPBACK))
    env.update({var: ",".join(str(i) for i in ids) for var, ids in (devices or {}).items()})
    return env


def devices_env(cat: catalog_mod.Catalog, node: str,
                accel_ids: resources.DeviceIds) -> dict[str, list[int]]:
    """Variable -> device ids for each accelerator the task's node has (or it was given)."""
    given = dict(accel_ids)
    found = cat.node(node)
    names = {a.name for a in found.accelerators} if found else set()
    return {visible_env(name, cat.visible_env): list(given.get(name, ()))
            for name in sorted(names | set(given))}


def needs_snapshot(paths: runs.RunPaths, attempt: int, alg: specs.Algorithm) -> bool:
    """Whether preparing the attempt copies its code, which takes as long as the code is
    big, or only makes directories (the snapshot exists already, or the job runs a
    command)."""
    return bool(alg.code_dir) and not runs.is_real_dir(paths.code_dir(attempt))


def prepare_attempt(paths: runs.RunPaths, attempt: int, alg: specs.Algorithm,
                    owner: tuple[int, int] | None = None,
                    cancelled: Callable[[], bool] | None = None,
                    policy: storage_paths.Policy | None = None,
                    ) -> tuple[pathlib.Path | None, pathlib.Path]:
    """Snapshot the code and create output dirs; returns (code snapshot, working dir).

    With an `owner` (the user tasks run as) the attempt's directory, its `metrics/`, the
    snapshot and the output directories made here become theirs, and the code is copied
    with their rights. `cancelled`: asked while copying the code, which stops
    (LaunchError) once it says yes. `policy`: the job's project's storage roots, which
    every local path the job named must still lie in (BadParameter).
    """
    paths.make_attempt_dirs(attempt, owner)
    code: pathlib.Path | None = None
    if alg.code_dir:
        code = paths.code_dir(attempt)
        # A remote code_dir was fetched to local_code_dir before the job was admitted.
        src = (jobpaths.own(paths, alg.local_code_dir) if alg.local_code_dir
               else jobpaths.named(policy, runs.local_path(alg.code_dir, "code_dir"),
                                   "algorithm.code_dir"))
        runs.snapshot(src, code, cancelled, owner)
    for out in alg.outputs:
        # One in object storage is written to a folder of the job's run directory first.
        made = (jobpaths.own(paths, out.local_dir or out.url) if objects.is_remote(out.url)
                else jobpaths.named(policy, out.local_dir or out.url,
                                    f"output '{out.name}'"))
        beneath.make_dirs(made, owner)
    if policy is not None:
        for ch in alg.inputs:
            # (a dataset version's copy is in the run folder, as a remote input's is)
            if not objects.is_remote(ch.url) and ch.dataset is None:
                jobpaths.named(policy, ch.local_dir or ch.url, f"input '{ch.name}'")
    cwd = code or paths.attempt_dir(attempt)  # both exist by now
    if alg.working_dir:
        wd = pathlib.Path(os.path.normpath(cwd / alg.working_dir))
        inside = not os.path.isabs(alg.working_dir) and wd.is_relative_to(cwd)
        cwd = (wd if inside or policy is None
               else jobpaths.named(policy, wd, "algorithm.working_dir"))
    return code, cwd


def in_environment(envs: storage_envs.Cache | None, engine: settings_mod.EngineConfig,
                   requirements: list[str], inherited: Mapping[str, str],
                   ) -> tuple[settings_mod.EngineConfig, dict[str, str]]:
    """The engine and environment of a task run in the environment of `requirements`:
    its python for the engine's, its bin/ first on PATH (a `command`'s `python` is it)."""
    if envs is None:
        raise errors.LaunchError("environments of requirements are not available here")
    folder = storage_envs.activate(envs, engine.python, requirements)
    env = dict(inherited)
    env["PATH"] = os.pathsep.join([str(folder / "bin"), env.get("PATH", os.defpath)])
    env["VIRTUAL_ENV"] = str(folder)
    env.pop("PYTHONHOME", None)
    return engine.model_copy(update={"python": str(folder / "bin" / "python")}), env


def checkpoint_dir(spec: specs.JobCreate) -> str | None:
    """The folder of the job's checkpoint channel, if it names one: where its attempts
    write checkpoints, and those after the first (CORRAL_ATTEMPT > 1) resume from."""
    ft = spec.spec.fault_tolerance
    name = ft.checkpoint if ft is not None else None
    return next((out.local_dir or out.url for out in spec.algorithm.outputs
                 if name is not None and out.name == name), None)


def launch_spec(
    *, paths: runs.RunPaths, cat: catalog_mod.Catalog, spec: specs.JobCreate, job_id: str,
    attempt: int, task: str, rank: int, launch_id: str, node: str, gpu_ids: Sequence[int],
    master_port: int, code: pathlib.Path | None, cwd: pathlib.Path,
    inherited: Mapping[str, str],
    run_as: tuple[int, int] | None = None,
    demand: resources.Resources = resources.ZERO, gang: Sequence[str] = (),
    accel_ids: resources.DeviceIds = (),
    envs: storage_envs.Cache | None = None,
) -> base.LaunchSpec:
    """One task's launch. `inherited`: the environment every task starts from (base_env
    of the server's); `envs`: where the environments of jobs' requirements are."""
    alg = spec.algorithm
    engine = cat.engine(alg.engine)
    image = alg.engine.image_url if alg.engine is not None else None
    if image:  # a boot file runs with the image's python
        engine = engine.model_copy(update={"python": containers.IMAGE_PYTHON})
    if alg.engine is not None and alg.engine.requirements:
        engine, inherited = in_environment(envs, engine, alg.engine.requirements, inherited)
    # What corral and the job add to the server's environment: all a container gets of it.
    own = task_env(inherited={}, alg=alg,
                   job_id=job_id, task=task, rank=rank, world=spec.spec.resource.node_count,
                   attempt=attempt, master_port=master_port, gpu_ids=gpu_ids,
                   devices=devices_env(cat, node, accel_ids))
    own[metrics.FILE_ENV] = str(paths.metrics_path(attempt, task))
    checkpoint = checkpoint_dir(spec)
    if checkpoint is not None:  # every attempt: the first must know where to write them
        own[faultspec.CHECKPOINT_ENV] = checkpoint
    summary = alg.summary_dir()
    if summary is not None:  # algorithm.summary: a folder of one of its output channels
        own[jobfields.SUMMARY_ENV] = summary
    env = {**inherited, **own}
    argv = argv_for(alg, code, engine)
    shell = bool(alg.command)
    if alg.command and not image:
        words = simple_command(alg.command, env.get("PATH", os.defpath))
        if words is not None:
            argv, shell = (*words, *argv[1:]), False
    ls = base.LaunchSpec(
        job_id=job_id, task=task, attempt=attempt, launch_id=launch_id,
        argv=argv, shell=shell, cwd=str(cwd), env=env,
        log_path=str(paths.log_path(attempt, task)),
        control_dir=str(paths.control_dir(attempt)), node=node, gpu_ids=tuple(gpu_ids),
        run_as=run_as,
        demand=demand, code_dir=str(code) if code else "",
        output_dirs=tuple(out.local_dir or out.url for out in alg.outputs),
        input_dirs=input_paths(spec), gang=tuple(gang),
        follow=tuple(i for i, ch in enumerate(alg.inputs) if ch.follow),
        strategy=(spec.spec.schedule_policy or specs.SchedulePolicy()).strategy)
    if not image:
        return ls
    return images.contained(ls, image=image, runtime=cat.container_runtime,
                            options=cat.container_options, own_env=own, inherited=inherited,
                            job_dir=paths.job_dir, attempt_dir=paths.attempt_dir(attempt))
