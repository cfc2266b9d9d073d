"""Fetching what a job needs before it is admitted, and uploading what it writes.

A job whose code, inputs or model are in object storage, or that resumes from an earlier
version, is created with `staging = 'pending'` and stays out of the queue until everything
is in local folders: the job's `status.reason` tells the progress meanwhile. What fails to
arrive fails the job (`Failed/CreateFailed`) with the reason. Output channels in object
storage are written locally by the job and uploaded from there, every `period` while it
runs and once more when it has ended; an upload is tried `upload_retries` times.
"""

from __future__ import annotations

import dataclasses
import logging
import pathlib
import time
from collections.abc import Callable
from typing import Any

from corral import settings as settings_mod
from corral.domain import errors, specs
from corral.domain import jobs as jobs_mod
from corral.storage import objects
from corral.store import db, repo
from corral.store import versions as versions_repo

log = logging.getLogger(__name__)
#: seconds between progress updates of a download in a job's status
PROGRESS_EVERY = 1.0


class StagingFailed(errors.CorralError):
    """A job's inputs could not be fetched."""


@dataclasses.dataclass
class Fetcher:
    """Fetches everything one job needs; reports progress in the job's status."""

    store: db.Store
    stores: objects.Stores
    settings: settings_mod.Settings
    now: Callable[[], int]
    job: Any
    _said: float = 0.0

    def run(self) -> None:
        spec = repo.job_spec(self.job)
        alg = spec.algorithm
        steps: list[tuple[str, str, pathlib.Path, bool]] = []
        if objects.is_remote(alg.code_dir) and alg.local_code_dir:
            steps.append(("code_dir", str(alg.code_dir), pathlib.Path(alg.local_code_dir), False))
        for ch in alg.inputs:
            if objects.is_remote(ch.url) and ch.local_dir:
                steps.append((f"input '{ch.name}'", ch.url, pathlib.Path(ch.local_dir), False))
        model = _model_step(spec)
        if model:
            steps.append(model)
        steps += self._resume_steps(spec)
        total_files = 0
        for what, url, dest, skip_versions in steps:
            if not self._still_wanted():
                return
            total_files += self._fetch(what, url, dest, skip_versions)
        with self.store.begin() as conn:
            done = repo.update_job(conn, self.job.id, now=self.now(), staging=None,
                                   wait_reason=None)
            if done and steps:
                repo.add_event(conn, self.job.id, self.now(),
                               f"Inputs fetched: {total_files} file(s) from "
                               f"{len(steps)} location(s)")

    def _fetch(self, what: str, url: str, dest: pathlib.Path, skip_versions: bool) -> int:
        src = self.stores.open(url, self.job.project_id)
        last: Exception | None = None
        for attempt in range(self.settings.upload_retries):
            if attempt:
                time.sleep(self.settings.upload_retry_delay * 2 ** (attempt - 1))
            try:
                files, _size = objects.copy_tree(
                    src, self.stores.open(str(dest), self.job.project_id),
                    progress=lambda *p, w=what: self._progress(w, *p),
                    skip_versions=skip_versions)
                return files
            except FileNotFoundError as exc:
                if skip_versions:  # nothing to resume from is no failure
                    self._event(f"{what}: {exc}; starting without it", "Warning")
                    return 0
                raise StagingFailed(f"{what}: {url} does not exist") from None
            except Exception as exc:  # botocore and aiohttp raise their own types
                last = exc
                log.warning("fetching %s of job %s failed: %s", what, self.job.id, exc)
        raise StagingFailed(f"{what}: fetching {url} failed after "
                            f"{self.settings.upload_retries} tries: {_one_line(last)}")

    def _progress(self, what: str, files: int, total: int, done: int, size: int) -> None:
        if time.monotonic() - self._said < PROGRESS_EVERY and files < total:
            return
        self._said = time.monotonic()
        text = (f"fetching {what}: {files}/{total} file(s), "
                f"{done / 1e6:.1f}/{size / 1e6:.1f} MB")
        with self.store.begin() as conn:
            repo.update_job(conn, self.job.id, now=self.now(), wait_reason=text)

    def _resume_steps(self, spec: specs.JobCreate) -> list[tuple[str, str, pathlib.Path, bool]]:
        with self.store.read() as conn:
            me = versions_repo.version_of(conn, self.job.id)
            parent = (repo.job_by_id(conn, me.parent_job_id)
                      if me is not None and me.resume and me.parent_job_id else None)
        if parent is None:
            return []
        theirs = {o.name: o for o in repo.job_spec(parent).algorithm.outputs}
        steps = []
        for out in spec.algorithm.outputs:
            prev = theirs.get(out.name)
            if prev is None or not out.local_dir:
                continue
            # The earlier version's local folder is the freshest copy; its remote copy
            # serves when the local one is gone.
            local = pathlib.Path(prev.local_dir or "")
            src = str(local) if prev.local_dir and local.is_dir() else prev.url
            steps.append((f"outputs of the earlier version ('{out.name}')", src,
                          pathlib.Path(out.local_dir), True))
        return steps

    def _still_wanted(self) -> bool:
        with self.store.read() as conn:
            row = repo.job_by_id(conn, self.job.id)
        return bool(row is not None and row.deleted_at is None
                    and row.phase == jobs_mod.Phase.CREATING.value)

    def _event(self, message: str, level: str) -> None:
        with self.store.begin() as conn:
            repo.add_event(conn, self.job.id, self.now(), message, level=level)


def _model_step(spec: specs.JobCreate) -> tuple[str, str, pathlib.Path, bool] | None:
    """Fetching the job's model, when it lies in object storage."""
    param = next((p for p in spec.algorithm.parameters if p.name == "model_url"), None)
    model = spec.model
    if model is None or param is None or not objects.is_remote(model.location):
        return None
    assert model.location is not None
    return (f"model '{model.name}' version {model.version}", model.location,
            pathlib.Path(param.value), False)


def fail(store: db.Store, job: Any, now: int, message: str) -> None:
    with store.begin() as conn:
        repo.update_job(conn, job.id, now=now, staging=None, wait_reason=None)
        repo.transition(conn, job.id, jobs_mod.Phase.FAILED, jobs_mod.SecondaryPhase.CREATE_FAILED,
                        now=now, message=f"Job failed: {message}", level="Error",
                        fields={"end_time": now,
                                "failure_class": jobs_mod.FailureClass.LAUNCH_ERROR.value,
                                "failure_message": message})


# --- uploads --------------------------------------------------------------------------------


@dataclasses.dataclass
class Upload:
    """One output channel in object storage being uploaded from its local folder."""

    job_id: str
    project_id: str
    channel: str
    url: str
    local_dir: pathlib.Path
    period: float
    at_end_only: bool
    seen: objects.Seen = dataclasses.field(default_factory=dict)
    last: float = 0.0
    failing: bool = False

    def due(self, now: float) -> bool:
        return not self.at_end_only and now - self.last >= self.period


def uploads_of(job: Any, spec: specs.JobCreate) -> list[Upload]:
    from corral.scheduler import submit

    return [Upload(job_id=job.id, project_id=job.project_id, channel=o.name, url=o.url,
                   local_dir=pathlib.Path(o.local_dir or ""),
                   period=submit.period_seconds(o), at_end_only=o.mode == "upload_at_end",
                   last=time.monotonic())
            for o in spec.algorithm.outputs if objects.is_remote(o.url) and o.local_dir]


def upload(stores: objects.Stores, settings: settings_mod.Settings, up: Upload) -> int:
    """Upload what changed, with retries; raises the last error when every try failed."""
    dst = stores.open(up.url, up.project_id)
    last: Exception | None = None
    for attempt in range(settings.upload_retries):
        if attempt:
            time.sleep(settings.upload_retry_delay * 2 ** (attempt - 1))
        try:
            return objects.upload_changed(up.local_dir, dst, up.seen)
        except Exception as exc:  # botocore and aiohttp raise their own types
            last = exc
            log.warning("upload of %s/%s failed (try %d): %s", up.job_id, up.channel,
                        attempt + 1, exc)
    assert last is not None
    raise last


def _one_line(exc: Exception | None) -> str:
    text = str(exc or "unknown error").strip().splitlines()
    return text[0] if text else type(exc).__name__
