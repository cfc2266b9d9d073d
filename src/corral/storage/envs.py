"""The cache of environments built for jobs' requirements, on disk.

Each environment is a virtualenv in a folder of its own, `<root>/<key>/` (the key:
`domain.environments.key`). A virtualenv cannot be moved once made (its scripts name its
path), so it is built in its place, under a lock (`<root>/<key>.lock`, `flock`: one build
at a time, whichever thread or process asks), and is ready only once its `.corral-ready`
marker is written, last: a folder without it is a build cut short, removed by the next one.
Each use touches `.corral-used`, whose time says when a job last used it (the garbage
collector's clock). The last build's output is `<root>/<key>.log`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import functools
import os
import pathlib
import re
import shutil
import subprocess
from collections.abc import Iterator

from corral.domain import environments, errors

#: written last: the environment is whole
READY = ".corral-ready"
#: touched at each use; its modification time is the environment's last use
USED = ".corral-used"
_KEY_RE = re.compile(rf"^[0-9a-f]{{{environments.KEY_LENGTH}}}$")


@dataclasses.dataclass(frozen=True)
class Cache:
    root: pathlib.Path

    def folder(self, key: str) -> pathlib.Path:
        return self.root / key

    def python(self, key: str) -> pathlib.Path:
        return self.folder(key) / "bin" / "python"

    def log_path(self, key: str) -> pathlib.Path:
        return self.root / f"{key}.log"

    def is_ready(self, key: str) -> bool:
        return (self.folder(key) / READY).is_file()

    def mark_ready(self, key: str) -> None:
        self.touch(key)
        (self.folder(key) / READY).write_text("ok\n")

    def touch(self, key: str) -> None:
        (self.folder(key) / USED).touch()

    def last_used(self, key: str) -> float | None:
        """When a job last used it (or it was built), None when it has no marker."""
        try:
            return (self.folder(key) / USED).stat().st_mtime
        except FileNotFoundError:
            return None

    def built(self) -> list[str]:
        """The keys of the environments there, whole or not."""
        try:
            return sorted(p.name for p in self.root.iterdir()
                          if _KEY_RE.match(p.name) and p.is_dir() and not p.is_symlink())
        except FileNotFoundError:
            return []

    @contextlib.contextmanager
    def claim(self, key: str) -> Iterator[bool]:
        """Hold the environment's lock while the block runs, if no one else does: yields
        whether it was had (False: another build or removal of it is under way)."""
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.root / f"{key}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            yield True
        finally:
            os.close(fd)  # (releases the lock)

    def remove(self, key: str) -> None:
        """Remove an environment (under its claim): not ready first, then its files."""
        folder = self.folder(key)
        with contextlib.suppress(FileNotFoundError):
            (folder / READY).unlink()
        shutil.rmtree(folder, ignore_errors=True)


def interpreter_version(python: str) -> str:
    """The base interpreter's version (`3.11.7`), asked of it once per file: a new
    interpreter at the same path is asked again. LaunchError when it cannot be run."""
    try:
        mtime = os.stat(python).st_mtime_ns
    except OSError as exc:
        raise errors.LaunchError(f"the engine's interpreter {python}: {exc.strerror}") from None
    return _version(python, mtime)


@functools.lru_cache(maxsize=64)
def _version(python: str, _mtime_ns: int) -> str:
    try:
        out = subprocess.run([python, "-c", "import platform; print(platform.python_version())"],
                             capture_output=True, text=True, timeout=60, check=True)
    except (OSError, subprocess.SubprocessError) as exc:
        raise errors.LaunchError(f"the engine's interpreter {python} cannot be run: "
                                 f"{exc}") from None
    return out.stdout.strip()


def key_of(python: str, requirements: list[str]) -> str:
    """The key of the environment of `requirements` made from the interpreter `python`."""
    return environments.key(requirements, python, interpreter_version(python))


def activate(cache: Cache, python: str, requirements: list[str]) -> pathlib.Path:
    """The folder of the environment a task runs in, marked used now; LaunchError when it
    is not built (it was removed meanwhile)."""
    key = key_of(python, requirements)
    if not cache.is_ready(key):
        raise errors.LaunchError(f"environment {key} of the job's requirements is not built")
    cache.touch(key)
    return cache.folder(key)
