"""Running a task in an OCI image (`engine.image_url`) with podman: which image references a
job may give, and the `podman run` command line that runs a task's program in one.

Pure: the program's path, the folders to mount and the environment file are the caller's.
The command line is the task's own (the local executor's keeper starts it, holds it and
reads its output as it does any task's): podman's client stays in the foreground until the
container ends, passes SIGTERM on to it and exits with its code.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence

#: what the `container_runtime` setting may name
RUNTIMES = ("podman",)
#: a task's container is named after its launch: `podman rm -f corral-<launch id>` reaches it
NAME_PREFIX = "corral-"
#: the interpreter a boot file runs with in an image: the image's own, found on its PATH
IMAGE_PYTHON = "python3"
#: the device of one NVIDIA GPU for podman's Container Device Interface (`nvidia-ctk cdi
#: generate` writes the specification that names it)
GPU_DEVICE = "nvidia.com/gpu={}"

_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_DOMAIN = rf"{_LABEL}(?:\.{_LABEL})*(?::[0-9]+)?"
_PATH = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
#: an image reference as registries write them ([registry[:port]/]path[:tag][@digest]):
#: no transport (`oci:`, `docker-archive:`, ...), which would name a file of the server's
REFERENCE_RE = re.compile(
    rf"^(?:{_DOMAIN}/)?{_PATH}(?:/{_PATH})*(?::{_TAG})?(?:@{_DIGEST})?\Z")


#: what podman reads as a transport before a ':' rather than as an image's name and tag
TRANSPORTS = frozenset(("containers-storage", "dir", "docker", "docker-archive",
                        "docker-daemon", "oci", "oci-archive", "ostree", "sif", "tarball"))


def check_reference(image: str) -> None:
    """ValueError unless `image` is an image reference a registry would take."""
    if (len(image) > 512 or not REFERENCE_RE.match(image)
            or image.split(":", 1)[0] in TRANSPORTS):
        raise ValueError(f"engine.image_url '{image[:100]}' is not an image reference "
                         "([registry[:port]/]name[:tag][@digest], e.g. "
                         "swr.example.com/team/train:1.0)")


def container_name(launch_id: str) -> str:
    return NAME_PREFIX + launch_id


def env_file(env: Mapping[str, str]) -> str:
    """The task's environment as podman's `--env-file` reads it (a value may hold no line
    break: ValueError)."""
    for key, value in env.items():
        if "\n" in value or "\r" in value:
            raise ValueError(f"environment variable '{key}' holds a line break, which a "
                             "container's environment cannot be given")
    return "".join(f"{k}={v}\n" for k, v in sorted(env.items()))


@dataclasses.dataclass(frozen=True)
class Run:
    """One task in a container."""

    program: str  #: podman's path
    image: str
    name: str  #: container_name of the launch
    argv: tuple[str, ...]  #: the task's program and arguments, as the image sees them
    #: argv[0] is a shell command line and argv[1:] its arguments ("$@")
    shell: bool
    cwd: str
    env_file: str  #: the task's environment (env_file), read by podman as it starts
    mounts: tuple[str, ...]  #: folders bound at the same path in the container
    gpu_ids: tuple[int, ...] = ()
    user: tuple[int, int] | None = None  #: uid and gid the task runs as (run_as)
    memory_mb: int = 0  #: its flavor's memory (0: no limit)
    options: tuple[str, ...] = ()  #: `container_options`, before the image


def run_argv(run: Run) -> tuple[str, ...]:
    """The `podman run` command line of a task (ValueError for a folder podman cannot
    bind: a ':' in its path)."""
    argv = [run.program, "run", "--rm", "--init", f"--name={run.name}",
            # the node's network and IPC: the addresses and ports corral gives a gang's
            # tasks are the node's; NCCL and data loaders share memory through /dev/shm
            "--network=host", "--ipc=host",
            f"--workdir={run.cwd}", f"--env-file={run.env_file}"]
    for path in mounts(run.mounts):
        if ":" in path:
            raise ValueError(f"cannot mount '{path}' in a container: a ':' in its path")
        argv.append(f"--volume={path}:{path}")
    argv += [f"--device={GPU_DEVICE.format(i)}" for i in run.gpu_ids]
    if run.user is not None:
        argv.append(f"--user={run.user[0]}:{run.user[1]}")
    if run.memory_mb > 0:
        argv += [f"--memory={run.memory_mb}m", f"--memory-swap={run.memory_mb}m"]
    argv += [*run.options, run.image]
    if run.shell:
        # As the keeper runs a command on the node: the shell outlives a SIGTERM so that
        # it reports how its command ended.
        args = ' "$@"' if len(run.argv) > 1 else ""
        argv += ["/bin/sh", "-c", f"trap : TERM INT HUP; {run.argv[0]}{args}", "sh",
                 *run.argv[1:]]
    else:
        argv += run.argv
    return tuple(argv)


def mounts(paths: Sequence[str]) -> list[str]:
    """The folders to bind, each once and none inside another that is bound."""
    kept: list[str] = []
    for path in sorted({p.rstrip("/") or "/" for p in paths}):
        if not any(path == k or path.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(path)
    return kept


def gpu_env(gpu_ids: Sequence[int]) -> str:
    """CUDA_VISIBLE_DEVICES in the container: it sees its GPUs only, numbered from 0."""
    return ",".join(str(i) for i in range(len(gpu_ids)))
