"""Fetching what a job needs before it is admitted, and uploading what it writes.

A job whose code, inputs or model are in object storage, or that resumes from an earlier
version, is created with `staging = 'pending'` and stays out of the queue until everything
is in local folders: the job's `status.reason` tells the progress meanwhile. What fails to
arrive fails the job (`Failed/CreateFailed`) with the reason. Output channels in object
storage are written locally by the job and uploaded from there, every `period` while it
runs and once more when it has ended; an upload is tried `upload_retries` times.

The local folders involved are ones a job can write (its output folders, the folders of
its run directory where remote channels are kept), which the server reads and writes as
its own user: each is checked again as it is used (`checked_folder`), and read without
following a link inside it and with no more than the rights of the user tasks run as
(`reader_of`); what is left out (a link, a file that user may not read) is said.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import pathlib
import time
from collections.abc import Callable

from corral import settings as settings_mod
from corral.domain import errors, jobs, specs
from corral.domain import following as following_rules
from corral.oskit import walk
from corral.services import dataset_versions, environments, following, jobpaths
from corral.storage import objects, runs
from corral.storage import paths as storage_paths
from corral.store import db, job_repo, rows, version_repo

log = logging.getLogger(__name__)
#: seconds between progress updates of a download in a job's status
PROGRESS_EVERY = 1.0


class StagingFailed(errors.CorralError):
    """A job's inputs could not be fetched."""


def checked_folder(settings: settings_mod.Settings, job_id: str, path: str | os.PathLike[str],
                   what: str, policy: Callable[[], storage_paths.Policy]) -> pathlib.Path:
    """The real path of a local folder of job `job_id`'s, checked now (a job may have made
    a link of it since it was submitted): one corral keeps in the job's run directory must
    still lie in it (LaunchError), one the job named in its project's roots (`policy`,
    BadParameter)."""
    paths = runs.RunPaths(settings.runs_dir, job_id)
    norm = pathlib.Path(os.path.normpath(path))
    if any(norm.is_relative_to(d) for d in (settings.runs_dir / job_id, paths.job_dir)):
        return jobpaths.own(paths, str(norm))
    return jobpaths.named(policy(), norm, what)


def reader_of(settings: settings_mod.Settings) -> walk.Reader | None:
    """Whose rights bound what the server reads of a job's folders on its behalf: the user
    tasks run as, or None when they run as the server's own. A `run_as` user this machine
    does not know (tasks run on a Ray cluster's nodes) may read what anyone may."""
    if settings.run_as is None:
        return None
    try:
        owner = jobpaths.task_user(settings, quiet=True)
    except errors.CorralError:
        return walk.Reader(-1, frozenset())
    return walk.Reader.of(owner) if owner is not None else None


def left_out(skipped: dict[str, str], most: int = 5) -> str:
    """What a copy left out, in a few words: `N file(s) (a/b: a link, ...)`."""
    shown = ", ".join(f"{rel}: {why}" for rel, why in list(skipped.items())[:most])
    more = f", and {len(skipped) - most} more" if len(skipped) > most else ""
    return f"{len(skipped)} file(s) or folder(s) ({shown}{more})"


@dataclasses.dataclass
class Fetcher:
    """Fetches everything one job needs; reports progress in the job's status."""

    store: db.Store
    stores: objects.Stores
    settings: settings_mod.Settings
    now: Callable[[], int]
    job: rows.Job
    _said: float = 0.0

    def run(self) -> None:
        spec = job_repo.job_spec(self.job)
        if environments.requirements_of(spec) and not self._environment(spec):
            return  # another job is building it: asked again at the next pass
        alg = spec.algorithm
        steps: list[Step] = []
        if objects.is_remote(alg.code_dir) and alg.local_code_dir:
            steps.append(Step("code_dir", str(alg.code_dir), pathlib.Path(alg.local_code_dir)))
        for ch in alg.inputs:
            if (objects.is_remote(ch.url) or ch.dataset) and ch.local_dir:
                own = following_rules.own_outputs(ch.url, [o.url for o in alg.outputs])
                steps.append(Step(f"input '{ch.name}'", ch.url, pathlib.Path(ch.local_dir),
                                  dataset=ch.dataset, follow=own if ch.follow else None))
        model = _model_step(spec)
        if model:
            steps.append(model)
        steps += self._resume_steps(spec)
        total_files = 0
        for step in steps:
            if not self._still_wanted():
                return
            total_files += self._fetch(step)
        with self.store.begin() as conn:
            done = job_repo.set_staging(conn, self.job.id, self.now(), staging=None,
                                        wait_reason=None)
            if done and steps:
                job_repo.add_event(conn, self.job.id, self.now(),
                               f"Inputs fetched: {total_files} file(s) from "
                               f"{len(steps)} location(s)")

    def _environment(self, spec: specs.JobCreate) -> bool:
        """Whether the job's environment is ready (found, or built now); StagingFailed
        when it cannot be built."""
        want = (spec.algorithm.engine or specs.Engine()).engine_id
        engine = next((e for e in self.settings.all_engines() if e.engine_id == want), None)
        if engine is None:
            raise StagingFailed(f"engine '{want}' is no longer configured")
        if not self._still_wanted():
            return False
        try:
            return environments.Builder(self.store, self.settings, self.now, self.job).ensure(
                engine, environments.requirements_of(spec))
        except environments.BuildFailed as exc:
            raise StagingFailed(exc.message) from None

    def _fetch(self, step: Step) -> int:
        if step.dataset is not None:
            return self._fetch_dataset(step, step.dataset)
        what, url, skip_versions = step.what, step.url, step.resume
        try:
            src = (self.stores.open(url, self.job.project_id) if objects.is_remote(url)
                   else objects.local(self._folder(step.source_job or self.job.id, url, what),
                                      reader_of(self.settings)))
            dst = objects.local(self._folder(self.job.id, step.dest, what))
        except errors.CorralError as exc:
            raise StagingFailed(f"{what}: {exc.message}") from None
        dst.drop_unfinished()  # what a server killed while fetching this was writing
        last: Exception | None = None
        for attempt in range(self.settings.upload_retries):
            if attempt:
                time.sleep(self.settings.upload_retry_delay * 2 ** (attempt - 1))
            try:
                if step.follow is not None:  # (what changes is copied again while it runs)
                    files = following.copy_changed(src, dst, (url, str(step.dest)),
                                                   step.follow, {})
                    return files
                files, _size = objects.copy_tree(
                    src, dst, progress=lambda *p, w=what: self._progress(w, *p),
                    skip_versions=skip_versions)
                if src.skipped:
                    self._event(f"{what}: {left_out(src.skipped)} not copied: a link, or not "
                                "a file the job's user may read", "Warning")
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

    def _fetch_dataset(self, step: Step, ref: specs.DatasetRef) -> int:
        """A dataset version's files, checked against its hashes, and its manifest."""
        last: Exception | None = None
        for attempt in range(self.settings.upload_retries):
            if attempt:
                time.sleep(self.settings.upload_retry_delay * 2 ** (attempt - 1))
            try:
                dst = objects.local(self._folder(self.job.id, step.dest, step.what))
                # Made anew: a server killed while making it left the file it was writing
                # beside its name, which the job would see in its folder.
                objects.remove_tree(dst)
                row = dataset_versions.fetch(self.store, self.stores, self.job.project_id,
                                             ref, dst)
            except errors.CorralError as exc:
                raise StagingFailed(f"{step.what}: {exc.message}") from None
            except FileNotFoundError:
                raise StagingFailed(f"{step.what}: dataset '{ref.name}' version "
                                    f"{ref.version_name}: its files are gone from "
                                    f"{step.url}") from None
            except Exception as exc:  # botocore and aiohttp raise their own types
                last = exc
                log.warning("fetching %s of job %s failed: %s", step.what, self.job.id, exc)
                continue
            self._event(f"{step.what}: dataset '{ref.name}' version {ref.version_name} "
                        f"({row.number_of_samples} sample(s), {row.content_hash}), its "
                        "files checked against their hashes", "Info")
            return 1 + len(json.loads(row.files))
        raise StagingFailed(f"{step.what}: fetching dataset '{ref.name}' version "
                            f"{ref.version_name} from {step.url} failed after "
                            f"{self.settings.upload_retries} tries: {_one_line(last)}")

    def _progress(self, what: str, files: int, total: int, done: int, size: int) -> None:
        if time.monotonic() - self._said < PROGRESS_EVERY and files < total:
            return
        self._said = time.monotonic()
        text = (f"fetching {what}: {files}/{total} file(s), "
                f"{done / 1e6:.1f}/{size / 1e6:.1f} MB")
        with self.store.begin() as conn:
            job_repo.set_wait_reason(conn, self.job.id, self.now(), text)

    def _folder(self, job_id: str, path: str | os.PathLike[str], what: str) -> pathlib.Path:
        return checked_folder(self.settings, job_id, path, what, self._policy)

    def _policy(self) -> storage_paths.Policy:
        return jobpaths.Policies(self.store, self.settings).of(self.job.project_id)

    def _resume_steps(self, spec: specs.JobCreate) -> list[Step]:
        with self.store.read() as conn:
            me = version_repo.version_of(conn, self.job.id)
            parent = (job_repo.job_by_id(conn, me.parent_job_id)
                      if me is not None and me.resume and me.parent_job_id else None)
        if parent is None:
            return []
        theirs = {o.name: o for o in job_repo.job_spec(parent).algorithm.outputs}
        steps = []
        for out in spec.algorithm.outputs:
            prev = theirs.get(out.name)
            if prev is None or not out.local_dir:
                continue
            # The earlier version's local folder is the freshest copy; its remote copy
            # serves when the local one is gone.
            local = pathlib.Path(prev.local_dir or "")
            src = str(local) if prev.local_dir and local.is_dir() else prev.url
            steps.append(Step(f"outputs of the earlier version ('{out.name}')", src,
                              pathlib.Path(out.local_dir), resume=True, source_job=parent.id))
        return steps

    def _still_wanted(self) -> bool:
        with self.store.read() as conn:
            row = job_repo.job_by_id(conn, self.job.id)
        return bool(row is not None and row.deleted_at is None
                    and row.phase == jobs.Phase.CREATING.value)

    def _event(self, message: str, level: str) -> None:
        with self.store.begin() as conn:
            job_repo.add_event(conn, self.job.id, self.now(), message, level=level)


@dataclasses.dataclass(frozen=True)
class Step:
    """One thing fetched: from `url` (in object storage, or a local folder of job
    `source_job`'s) into the local folder `dest` of the job's."""

    what: str
    url: str
    dest: pathlib.Path
    #: an earlier version's outputs, resumed from: versions' folders left out, and nothing
    #: there is no failure
    resume: bool = False
    source_job: str | None = None
    #: a dataset version, copied and checked against its hashes
    dataset: specs.DatasetRef | None = None
    #: a followed input (`services.following`): the folders in it that are the job's own
    #: outputs, left out
    follow: tuple[str, ...] | None = None


def _model_step(spec: specs.JobCreate) -> Step | None:
    """Fetching the job's model, when it lies in object storage."""
    param = next((p for p in spec.algorithm.parameters if p.name == "model_url"), None)
    model = spec.model
    if model is None or param is None or not objects.is_remote(model.location):
        return None
    assert model.location is not None
    return Step(f"model '{model.name}' version {model.version}", model.location,
                pathlib.Path(param.value))


def fail(store: db.Store, job: rows.Job, now: int, message: str) -> None:
    with store.begin() as conn:
        job_repo.set_staging(conn, job.id, now, staging=None, wait_reason=None)
        job_repo.transition(conn, job.id, jobs.Phase.FAILED,
                            jobs.SecondaryPhase.CREATE_FAILED, now=now,
                            message=f"Job failed: {message}", level="Error",
                            fields={"end_time": now,
                                    "failure_class": jobs.FailureClass.LAUNCH_ERROR.value,
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
    #: what the last upload left out (relative path -> why): links, files the job's user
    #: may not read
    skipped: dict[str, str] = dataclasses.field(default_factory=dict)

    def due(self, now: float) -> bool:
        return not self.at_end_only and now - self.last >= self.period


def uploads_of(job: rows.Job, spec: specs.JobCreate) -> list[Upload]:
    from corral.services import submit

    return [Upload(job_id=job.id, project_id=job.project_id, channel=o.name, url=o.url,
                   local_dir=pathlib.Path(o.local_dir or ""),
                   period=submit.period_seconds(o), at_end_only=o.mode == "upload_at_end",
                   last=time.monotonic())
            for o in spec.algorithm.outputs if objects.is_remote(o.url) and o.local_dir]


def upload(stores: objects.Stores, settings: settings_mod.Settings, up: Upload) -> int:
    """Upload what changed, with retries; raises the last error when every try failed.

    The local folder is in the job's run directory (LaunchError when it leads out of it);
    what is left out of it is kept in `up.skipped`, and said in the server's log once."""
    src = objects.local(jobpaths.own(runs.RunPaths(settings.runs_dir, up.job_id),
                                      str(up.local_dir)), reader_of(settings))
    dst = stores.open(up.url, up.project_id)
    last: Exception | None = None
    for attempt in range(settings.upload_retries):
        if attempt:
            time.sleep(settings.upload_retry_delay * 2 ** (attempt - 1))
        try:
            count = objects.upload_changed(src, dst, up.seen)
            new = set(src.skipped) - set(up.skipped)
            if new:
                log.warning("output %s of job %s: not uploaded: %s", up.channel, up.job_id,
                            left_out({k: src.skipped[k] for k in sorted(new)}))
            up.skipped = dict(src.skipped)
            return count
        except Exception as exc:  # botocore and aiohttp raise their own types
            last = exc
            log.warning("upload of %s/%s failed (try %d): %s", up.job_id, up.channel,
                        attempt + 1, exc)
    assert last is not None
    raise last


def _one_line(exc: Exception | None) -> str:
    text = str(exc or "unknown error").strip().splitlines()
    return text[0] if text else type(exc).__name__
