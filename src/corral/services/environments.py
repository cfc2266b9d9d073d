"""Building the environments jobs ask for (`algorithm.engine.requirements`) before they are
admitted, and removing those no job has used for a while.

A job with requirements is staged (`services/staging.py`): on the storage component's
threads, never the scheduler's, its environment is found in the cache or built there with
`uv` (`python -m venv` and pip where uv is missing), from its engine's interpreter. One
build at a time per environment: a job whose environment another job is building waits,
Creating, saying so, and is asked about again at the next pass. A build that fails removes
what it made and fails the job with the installer's last lines. See docs/environments.md.
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
import os
import pathlib
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence

import sqlalchemy as sa

from corral import settings as settings_mod
from corral.domain import errors, specs
from corral.storage import envs
from corral.store import db, job_repo, rows, version_repo

log = logging.getLogger(__name__)
#: the most of an installer's output told in a job's event or failure
TAIL_CHARS = 2000
#: pip's settings that uv reads under names of its own (uv reads no pip.conf)
PIP_TO_UV = (("PIP_INDEX_URL", "UV_INDEX_URL"), ("PIP_EXTRA_INDEX_URL", "UV_EXTRA_INDEX_URL"))


class BuildFailed(errors.CorralError):
    """The job's environment could not be built."""


def find_uv() -> str | None:
    """The uv binary: the `uv` package's (a dependency of corral), else one on PATH."""
    try:
        found = importlib.import_module("uv").find_uv_bin()
        return str(found)
    except (ImportError, FileNotFoundError, AttributeError):
        return shutil.which("uv")


def installer(settings: settings_mod.Settings) -> str | None:
    """The uv binary builds are made with, or None for `python -m venv` and pip."""
    if settings.environment_installer == "pip":
        return None
    uv = find_uv()
    if uv is None and settings.environment_installer == "uv":
        raise BuildFailed("environment_installer is 'uv' but no uv binary was found")
    return uv


def build_commands(uv: str | None, python: str, folder: pathlib.Path,
                   requirements_file: pathlib.Path) -> tuple[list[str], list[str]]:
    """Make the virtualenv; install the requirements into it."""
    env_python = str(folder / "bin" / "python")
    if uv is not None:
        return ([uv, "venv", "--no-config", "--python", python, str(folder)],
                [uv, "pip", "install", "--no-config", "--python", env_python,
                 "-r", str(requirements_file)])
    return ([python, "-m", "venv", str(folder)],
            [env_python, "-m", "pip", "install", "--disable-pip-version-check",
             "--no-input", "-r", str(requirements_file)])


def build_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The installer's environment: the server's, less corral's own settings (its key
    among them), with pip's index settings given to uv too, and no Python downloaded."""
    env = {k: v for k, v in (os.environ if environ is None else environ).items()
           if not k.startswith("CORRAL_") and k not in ("VIRTUAL_ENV", "PYTHONHOME",
                                                         "PYTHONPATH")}
    for pip, uv in PIP_TO_UV:
        if pip in env and uv not in env and "UV_DEFAULT_INDEX" not in env:
            env[uv] = env[pip]
    env["UV_PYTHON_DOWNLOADS"] = "never"
    return env


def tail(path: pathlib.Path, chars: int = TAIL_CHARS, start: int = 0) -> str:
    """The end of a build's log (from byte `start` on), whole lines, stripped."""
    try:
        with open(path, "rb") as f:
            f.seek(max(start, f.seek(0, os.SEEK_END) - chars))
            text = f.read().decode(errors="replace")
    except FileNotFoundError:
        return ""
    lines = text.strip().splitlines()
    if len(text) >= chars and len(lines) > 1:
        lines = lines[1:]  # the first may be cut
    return "\n".join(lines)


@dataclasses.dataclass
class Builder:
    """Finds or builds one job's environment, saying how in the job's status and events."""

    store: db.Store
    settings: settings_mod.Settings
    now: Callable[[], int]
    job: rows.Job

    def ensure(self, engine: settings_mod.EngineConfig, requirements: list[str]) -> bool:
        """True once the environment is ready (found or built now); False while another
        job's build of it is under way. BuildFailed when it cannot be built."""
        cache = envs.Cache(self.settings.envs_dir)
        try:
            key = envs.key_of(engine.python, requirements)
        except errors.CorralError as exc:
            raise BuildFailed(exc.message) from None
        if cache.is_ready(key):
            cache.touch(key)
            self._event(f"Using environment {key} (cached; {len(requirements)} "
                        "requirement(s))")
            return True
        with cache.claim(key) as mine:
            if not mine:
                self._waiting(f"waiting for environment {key}, being built for another job")
                return False
            if cache.is_ready(key):  # built between the look and the claim
                cache.touch(key)
                self._event(f"Using environment {key} (cached; {len(requirements)} "
                            "requirement(s))")
                return True
            self._build(cache, key, engine.python, requirements)
        return True

    def _build(self, cache: envs.Cache, key: str, python: str,
               requirements: list[str]) -> None:
        uv = installer(self.settings)
        tool = "uv" if uv else "venv and pip"
        cache.remove(key)  # what a build cut short left
        reason = f"building environment {key}"
        with self.store.begin() as conn:
            job_repo.set_wait_reason(conn, self.job.id, self.now(), reason)
            job_repo.add_event(conn, self.job.id, self.now(),
                               f"Building environment {key} with {tool} from {python}: "
                               f"{', '.join(requirements)}")
        folder, log_path = cache.folder(key), cache.log_path(key)
        started = time.monotonic()
        try:
            self._run(build_commands(uv, python, folder, folder / "requirements.txt"),
                      folder, requirements, log_path)
        except BaseException:
            cache.remove(key)
            raise
        cache.mark_ready(key)
        log.info("environment %s built for job %s in %.1f s", key, self.job.id,
                 time.monotonic() - started)
        self._event(f"Environment {key} built in {time.monotonic() - started:.1f} s; the "
                    f"installer's last lines:\n{tail(log_path, 600)}")

    def _run(self, commands: Sequence[list[str]], folder: pathlib.Path,
             requirements: list[str], log_path: pathlib.Path) -> None:
        deadline = time.monotonic() + self.settings.environment_build_timeout
        with open(log_path, "wb") as out:
            for i, argv in enumerate(commands):
                if i == 1:  # the virtualenv is made: the request goes in it
                    (folder / "requirements.txt").write_text("\n".join(requirements) + "\n")
                out.write(f"$ {' '.join(argv)}\n".encode())
                out.flush()
                start = out.tell()
                try:
                    done = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, env=build_env(),
                                          cwd=self.settings.envs_dir,
                                          timeout=max(1.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    raise BuildFailed(f"the build took more than "
                                      f"{self.settings.environment_build_timeout:g} s "
                                      "(environment_build_timeout)") from None
                except OSError as exc:
                    raise BuildFailed(f"{argv[0]} cannot be run: {exc}") from None
                if done.returncode != 0:
                    raise BuildFailed(f"{'making the virtualenv' if i == 0 else 'installing'}"
                                      f" failed (exit {done.returncode}):\n"
                                      f"{tail(log_path, start=start)}")

    def _waiting(self, reason: str) -> None:
        if self.job.wait_reason == reason:
            return
        with self.store.begin() as conn:
            job_repo.set_wait_reason(conn, self.job.id, self.now(), reason)
            job_repo.add_event(conn, self.job.id, self.now(), reason[0].upper() + reason[1:])

    def _event(self, message: str) -> None:
        with self.store.begin() as conn:
            job_repo.add_event(conn, self.job.id, self.now(), message)


def requirements_of(spec: specs.JobCreate) -> list[str]:
    engine = spec.algorithm.engine
    return list(engine.requirements or []) if engine is not None else []


# --- garbage collection ---------------------------------------------------------------------


def in_use(conn: sa.Connection, settings: settings_mod.Settings) -> set[str]:
    """The keys of the environments of jobs that have not ended (a running job's is never
    removed, however long it runs)."""
    engines = {e.engine_id: e for e in settings.all_engines()}
    keys = set()
    for job in version_repo.unended_with_requirements(conn):
        spec = job_repo.job_spec(job)
        engine = engines.get((spec.algorithm.engine or specs.Engine()).engine_id or "")
        if engine is not None:
            try:
                keys.add(envs.key_of(engine.python, requirements_of(spec)))
            except errors.CorralError:
                continue
    return keys


def collect(store: db.Store, settings: settings_mod.Settings, now: float) -> list[str]:
    """Remove the environments no job has used for `environments_keep_days` (none with
    0), and none a job that has not ended uses; returns the keys removed."""
    if not settings.environments_keep_days:
        return []
    cache = envs.Cache(settings.envs_dir)
    with store.read() as conn:
        keep = in_use(conn, settings)
    removed = []
    for key in cache.built():
        used = cache.last_used(key)
        if key in keep or (used is not None
                           and now - used < settings.environments_keep_days * 86400):
            continue
        with cache.claim(key) as mine:
            if mine:  # (else a build of it is under way: it is wanted)
                cache.remove(key)
                cache.log_path(key).unlink(missing_ok=True)
                removed.append(key)
    if removed:
        log.info("environments: %d unused for %g days removed (%s)", len(removed),
                 settings.environments_keep_days, ", ".join(removed))
    return removed
