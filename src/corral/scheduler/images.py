"""A task of a job that gives `engine.image_url`: its launch turned into `podman run` of
that image (docs/environments.md#images).

The launch's argv is wrapped, nothing else changes: the executor's keeper starts podman's
client as it starts any task, holds it in the task's cgroup and session, and reads its
output into the task's log. The container gets the folders the task uses, bound at the
same paths, and the environment corral gives tasks; podman itself runs as the server's
user with the server's environment only, so nothing of a job's (its `environments`, a
folder it swapped for a link) configures it.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import shutil
from collections.abc import Mapping

from corral.domain import containers, errors
from corral.executors import base
from corral.executors.local import processes
from corral.oskit import beneath

#: where a job's tasks' environment files are, in its run folder (the server's, mode 0600)
ENV_DIR = "containers"


def program(runtime: str | None) -> str:
    """The container runtime's path on this machine, or LaunchError saying what is missing."""
    if runtime is None:
        raise errors.LaunchError("engine.image_url needs container_runtime = 'podman' in "
                                 "the server's settings")
    found = shutil.which(runtime)
    if found is None:
        raise errors.LaunchError(f"{runtime} is not installed on this machine")
    return found


def contained(ls: base.LaunchSpec, *, image: str, runtime: str | None,
              options: tuple[str, ...], own_env: Mapping[str, str],
              inherited: Mapping[str, str], job_dir: pathlib.Path,
              attempt_dir: pathlib.Path) -> base.LaunchSpec:
    """The launch `ls` run in `image`. `own_env`: what corral and the job add to the
    server's environment (`inherited`), which is all the container gets of it."""
    podman = program(runtime)
    name = containers.container_name(ls.launch_id)
    env = {**own_env, "CUDA_VISIBLE_DEVICES": containers.gpu_env(ls.gpu_ids),
           processes.LAUNCH_ENV: ls.launch_id}  # (the marker finds its processes too)
    try:
        text = containers.env_file(env)
        binds = tuple(p for p in (str(attempt_dir), ls.cwd, *ls.input_dirs, *ls.output_dirs)
                      if os.path.isabs(p))  # (an input in object storage is fetched first)
        for path in containers.mounts(binds):
            unlinked(path)
        argv = containers.run_argv(containers.Run(
            program=podman, image=image, name=name, argv=ls.argv, shell=ls.shell,
            cwd=ls.cwd, env_file=str(write_env(job_dir, ls.launch_id, text)),
            mounts=binds, gpu_ids=ls.gpu_ids, user=ls.run_as,
            memory_mb=ls.demand.memory_mb, options=options))
    except (ValueError, OSError) as exc:
        raise errors.LaunchError(f"cannot run {ls.task} in image {image}: {exc}") from None
    # podman's own process: the server's environment, and the GPUs as the node numbers
    # them (what the executor's samples read); it runs as the server's user and starts
    # the task as `run_as` in the container.
    return dataclasses.replace(
        ls, argv=argv, shell=False, run_as=None,
        env={**inherited, "CUDA_VISIBLE_DEVICES": ",".join(map(str, ls.gpu_ids))},
        cleanup=(podman, "rm", "--force", "--ignore", name))


def unlinked(path: str) -> None:
    """OSError when a link is on the way to `path`: podman, as the server's user, would
    follow it and bind what it points to (a folder the job's user could not reach)."""
    if os.path.realpath(path) != os.path.normpath(path):
        raise OSError(f"'{path}' is reached through a link, which is not bound in a container")


def write_env(job_dir: pathlib.Path, launch_id: str, text: str) -> pathlib.Path:
    """The launch's environment file, in a folder of the server's in the job's run folder
    (never through a link), readable by the server only; its path."""
    folder = job_dir / ENV_DIR
    fd = beneath.open_dir(folder, make=True, owner=os.geteuid())
    try:
        name = f"{launch_id}.env"
        beneath.replace(fd, name, lambda out: beneath.write_all(out, text.encode()),
                        mode=0o600)
    finally:
        os.close(fd)
    return folder / name
