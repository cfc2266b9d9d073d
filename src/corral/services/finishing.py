"""What happens after a job has ended: its final metrics, its last upload, its model.

The reconciler only moves a job to an ended phase; this runs afterwards, outside its
transactions, for every ended job not yet `finalized_at`. Each step is idempotent (a model
version is keyed by the job that made it and its files by the job's id), so a server that
dies half way through simply does the rest on its next start.
"""

from __future__ import annotations

import logging
import pathlib
from collections.abc import Callable, Sequence

import sqlalchemy as sa

from corral import settings as settings_mod
from corral.domain import errors, models, specs
from corral.services import collect, dataset_versions, jobpaths, staging
from corral.storage import objects, runs
from corral.storage import paths as storage_paths
from corral.store import db, job_repo, model_repo, rows, version_repo

log = logging.getLogger(__name__)


class NothingToRegister(errors.BadParameter):
    """The job's model output channel holds no files."""


def finish(store: db.Store, stores: objects.Stores, settings: settings_mod.Settings,
           job: rows.Job, now: Callable[[], int],
           uploads: list[staging.Upload] | None = None) -> None:
    if job.deleted_at is not None:
        finish_plain(store, settings, [job], now)
        return
    spec = job_repo.job_spec(job)
    if is_plain(settings, job, spec, uploads):
        finish_plain(store, settings, [job], now)
        return
    collect.collect_job(store, settings.runs_dir, job.id, now)
    reg = models.registration(spec, settings.model_channel)
    registering = reg is not None and reg.wanted(job.phase)
    ups = uploads if uploads is not None else staging.uploads_of(job, spec)
    with store.begin() as conn:  # before registering: the model version copies these
        _record_versions(conn, settings.runs_dir, [job])
    if reg is not None and registering:
        try:
            register(store, stores, settings, job, reg.model, reg.channel, now)
        except Exception as exc:  # any store's failure (botocore raises its own types)
            _event(store, job.id, now(), f"Model not registered: {_message(exc)}", "Warning")
    problems = [p for p in (_final_upload(store, stores, settings, job, spec, up, now)
                            for up in ups) if p]
    problems += _export_logs(store, stores, settings, job, spec, now)
    with store.begin() as conn:
        if problems:
            text = "; ".join(problems)
            job_repo.set_failure_message(conn, job.id, now(), (
                f"{job.failure_message}; {text}" if job.failure_message else text))
        _set_finished(conn, job.id, now())


def is_plain(settings: settings_mod.Settings, job: rows.Job, spec: specs.JobCreate,
             uploads: list[staging.Upload] | None = None) -> bool:
    """Whether finishing the job moves nothing: no model to register, no output to upload,
    no logs to export (most jobs)."""
    reg = models.registration(spec, settings.model_channel)
    ups = uploads if uploads is not None else staging.uploads_of(job, spec)
    return not ((reg is not None and reg.wanted(job.phase)) or ups
                or _log_export(spec))


def finish_plain(store: db.Store, settings: settings_mod.Settings, jobs: Sequence[rows.Job],
                 now: Callable[[], int]) -> None:
    """Finish ended jobs that have nothing to move, together: their last metrics read, then
    their versions fixed and all marked finished in one transaction (a deleted job is only
    marked)."""
    live = [j for j in jobs if j.deleted_at is None]
    collect.collect_jobs(store, settings.runs_dir, [j.id for j in live], now)
    with store.begin() as conn:
        _record_versions(conn, settings.runs_dir, live)
        job_repo.set_finalized(conn, [j.id for j in jobs], now())


def _log_export(spec: specs.JobCreate) -> bool:
    export = spec.spec.log_export_path
    return bool(export and (export.obs_url or export.host_path))


def _set_finished(conn: sa.Connection, job_id: str, now: int) -> None:
    job_repo.set_finalized(conn, [job_id], now)


def mark_finished(store: db.Store, job_id: str, now: int) -> None:
    with store.begin() as conn:
        _set_finished(conn, job_id, now)


def _record_versions(conn: sa.Connection, runs_dir: pathlib.Path, jobs: Sequence[rows.Job]) -> None:
    """Fix each ended version's final metrics and the code its last attempt ran."""
    if not jobs:
        return
    ids = [j.id for j in jobs]
    have = version_repo.versions_of(conn, ids)
    for job in jobs:
        if job.id not in have:
            version_repo.ensure_version(conn, job)
    finals = version_repo.finals_of(conn, ids)
    version_repo.set_final_metrics_of(conn, {i: finals.get(i, {}) for i in ids})
    attempts = job_repo.latest_attempts(conn, ids)
    for job_id in ids:
        attempt = attempts.get(job_id, 0)
        paths = runs.RunPaths(runs_dir, job_id)
        manifest = runs.read_code_manifest(paths.attempt_dir(attempt)) if attempt else None
        if manifest:
            version_repo.set_code(conn, job_id, attempt, manifest.get("code_hash"),
                                   manifest.get("git_commit"))


def register(store: db.Store, stores: objects.Stores, settings: settings_mod.Settings,
             job: rows.Job, model: str, channel: str,
             now: Callable[[], int]) -> rows.RegisteredVersion:
    """Register the files of the job's output `channel` as a new version of `model`.

    Returns the model version (the existing one when this job was registered before);
    errors.DuplicateName, with nothing made, when it was registered as another model: a
    job's outputs are one model version.
    """
    spec = job_repo.job_spec(job)
    out = next((o for o in spec.algorithm.outputs if o.name == channel), None)
    if out is None:
        raise errors.BadParameter(f"the job has no output channel '{channel}'")
    with store.read() as conn:
        before = model_repo.registered_from(conn, job.id)
    if before is not None and before.model_name == model:
        return before
    if before is not None:
        raise errors.DuplicateName(f"training job '{job.id}' is already registered as "
                                   f"{before.model_name} version {before.version}")
    source = _output_source(store, stores, settings, job, out)
    # Files go under the job's id, not the version number: copying again after a crash
    # lands on the same place, and the number is only taken once the files are there.
    location = objects.join(settings.models_dir, job.project_id, model, job.id)
    dest = stores.open(location, job.project_id)
    dest.drop_unfinished()  # what a server killed while copying them was writing
    try:
        files, size = objects.copy_tree(source, dest, skip_versions=True)
    except FileNotFoundError:
        raise NothingToRegister(f"output channel '{channel}' ({out.url}) does not exist") \
            from None
    if not files:
        raise NothingToRegister(f"output channel '{channel}' ({out.url}) holds no files")
    t = now()
    with store.begin() as conn:
        version_row = version_repo.ensure_version(conn, job)
        row = model_repo.ensure(conn, job.project_id, model, t)
        number = model_repo.take_number(conn, row.id, t)
        model_repo.add_version(conn, {
            "model_id": row.id, "version": number, "created_at": t, "location": location,
            "size_bytes": size, "file_count": files, "source_job_id": job.id,
            "source_job_name": job.name, "source_version": version_row.number,
            "source_channel": channel, "source_phase": job.phase,
            "metrics": version_repo.final_of(conn, job.id),
            "parameters": {p.name: p.value for p in spec.algorithm.parameters},
            "inputs": {c.name: c.url for c in spec.algorithm.inputs},
            "code_hash": version_row.code_hash, "git_commit": version_row.git_commit,
            "datasets": dataset_versions.lineage(conn, spec),
        })
        job_repo.add_event(conn, job.id, t, f"Model registered: {model} version {number} "
                       f"({files} file(s), {size} bytes)")
        if source.skipped:
            job_repo.add_event(conn, job.id, t, (
                f"Model {model} version {number}: {staging.left_out(source.skipped)} of "
                f"output '{channel}' left out: a link, or not a file the job's user may "
                "read"), level="Warning")
        registered = model_repo.registered_from(conn, job.id)
    assert registered is not None  # (added just above)
    return registered


def _output_source(store: db.Store, stores: objects.Stores, settings: settings_mod.Settings,
                   job: rows.Job, out: specs.Output) -> objects.Location:
    """Where an output channel's files are read from to register them: its local folder,
    checked against the job's roots (or run directory) now, and read with the rights of
    the user tasks run as; its object-storage copy when the local one is gone."""
    if out.local_dir:
        real = staging.checked_folder(
            settings, job.id, out.local_dir, f"output '{out.name}'",
            lambda: jobpaths.Policies(store, settings).of(job.project_id))
        source = objects.local(real, staging.reader_of(settings))
        if source.is_dir() or not objects.is_remote(out.url):
            return source
    return stores.open(out.url, job.project_id)  # the local copy is gone


def _final_upload(store: db.Store, stores: objects.Stores, settings: settings_mod.Settings,
                  job: rows.Job, spec: specs.JobCreate, up: staging.Upload,
                  now: Callable[[], int]) -> str | None:
    try:
        count = staging.upload(stores, settings, up)
    except Exception as exc:
        text = (f"output '{up.channel}' could not be uploaded to {up.url} after "
                f"{settings.upload_retries} tries ({_message(exc)}); its files are kept "
                f"at {up.local_dir}")
        _event(store, job.id, now(), f"Upload failed: {text}", "Error")
        return text
    _event(store, job.id, now(), f"Output '{up.channel}' uploaded to {up.url} "
           f"({count} file(s) changed since the last upload)", "Info")
    if up.skipped:
        _event(store, job.id, now(), f"Output '{up.channel}': {staging.left_out(up.skipped)} "
               "not uploaded: a link, or not a file the job's user may read", "Warning")
    return None


def _export_logs(store: db.Store, stores: objects.Stores, settings: settings_mod.Settings,
                 job: rows.Job, spec: specs.JobCreate, now: Callable[[], int]) -> list[str]:
    """Copy every attempt's logs to the job's log_export_path: to object storage here, and
    to a local folder again (the reconciler copies each attempt's as it ends, but a server
    killed before that copy was made would never make it; a copy already made is left as
    it is). Why a copy to object storage failed; a local one's failure is an event."""
    export = spec.spec.log_export_path
    dest = export and (export.obs_url or export.host_path)
    if not dest:
        return []
    paths = runs.RunPaths(settings.runs_dir, job.id)
    with store.read() as conn:
        last = job_repo.latest_attempt(conn, job.id)
    if not objects.is_remote(dest):
        policy = jobpaths.Policies(store, settings).of(job.project_id)
        owner = export_user(settings)
        for attempt in range(1, last + 1):
            try:
                export_local_logs(policy, paths, attempt, dest, owner)
            except (OSError, errors.CorralError) as exc:
                _event(store, job.id, now(), f"Log export failed: {_message(exc)}", "Warning")
        return []
    refused: list[str] = []
    try:
        for attempt in range(1, last + 1):
            refused += _export_attempt(paths, attempt, stores.open(
                objects.join(dest, f"attempt-{attempt}"), job.project_id))
    except Exception as exc:
        text = f"logs could not be exported to {dest} ({_message(exc)})"
        _event(store, job.id, now(), f"Log export failed: {text}", "Warning")
        return [text]
    if refused:
        text = f"logs left out of the export to {dest}: {'; '.join(refused)}"
        _event(store, job.id, now(), f"Log export failed: {text}", "Warning")
        return [text]
    return []


def export_local_logs(policy: storage_paths.Policy, paths: runs.RunPaths, attempt: int,
                      dest: str, owner: tuple[int, int] | None) -> None:
    """Copy an ended attempt's logs to a local log_export_path `dest`, checked against the
    job's storage roots again as it is written (a job may have made a link of it since it
    was submitted); OSError or CorralError when it cannot be."""
    real = jobpaths.named(policy, runs.local_path(dest, "log_export_path"), "log_export_path")
    runs.export_logs(paths, attempt, real, owner)


def export_user(settings: settings_mod.Settings, *, warn: bool = False,
                ) -> tuple[int, int] | None:
    """The user tasks run as, whom logs are exported as; None (the server's user) where
    there is no such user on this machine (tasks run on a Ray cluster's nodes), which
    `warn` says in the log."""
    try:
        return jobpaths.task_user(settings, quiet=True)
    except errors.CorralError as exc:
        if warn:
            log.warning("logs are exported as the server's user: %s", exc.message)
        return None


def _export_attempt(paths: runs.RunPaths, attempt: int, dest: objects.Location) -> list[str]:
    """Write an attempt's logs, opened without following a link a job planted, to `dest`;
    why any was left out."""
    files, refused = runs.open_logs(paths, attempt)
    try:
        for name, fh in files:
            dest.write(name, fh)
    finally:
        for _name, fh in files:
            fh.close()
    return refused


def _event(store: db.Store, job_id: str, now: int, message: str, level: str) -> None:
    try:
        with store.begin() as conn:
            if job_repo.job_by_id(conn, job_id) is not None:
                job_repo.add_event(conn, job_id, now, message, level=level)
    except sa.exc.SQLAlchemyError:
        log.exception("cannot record an event of job %s", job_id)


def _message(exc: BaseException) -> str:
    text = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return text.strip().splitlines()[0]


