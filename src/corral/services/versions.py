"""Versions of a training job: a new version made from one of its family, each change in
a transaction of its own.

A new version is an ordinary job, submitted with every check a job gets, that joins its
family (`submit.NewVersion`); the rules of what it takes from its parent are
`domain.versions.derive`'s. A job from before versions gets its version row (V0001 of a
family of its own) the first time its versions are asked for.
"""

from __future__ import annotations

import json

import sqlalchemy as sa

from corral.domain import errors, identity, jobs, specs, versions
from corral.services import runtime, submit
from corral.store import job_repo, rows, version_repo


def version_of(rt: runtime.Runtime, project_id: str, job_id: str
               ) -> tuple[rows.Job, rows.Version]:
    """The job and its version row (made first for a job from before versions)."""
    with rt.store.read() as conn:
        row = job_repo.get_job(conn, project_id, job_id)
        found = version_repo.version_of(conn, row.id)
    if found is not None:
        return row, found
    with rt.store.begin() as conn:
        row = job_repo.get_job(conn, project_id, job_id)
        return row, version_repo.ensure_version(conn, row)


def pick(conn: sa.Connection, me: rows.Version, row: rows.Job,
         wanted: str | int | None) -> tuple[rows.Version, rows.Job]:
    """The version `wanted` of the family of `row` (whose version is `me`); `me` itself
    when None."""
    if wanted is None:
        return me, row
    number = versions.parse(wanted)
    for v, job in version_repo.family_versions(conn, me.family_id):
        if v.number == number:
            return v, job
    raise errors.NotFound(f"version {versions.name(number)} of training job "
                          f"'{row.name}' does not exist")


def create(rt: runtime.Runtime, project_id: str, job_id: str, body: versions.VersionCreate,
           caller: identity.Principal, now: int) -> str:
    """A new version of the job, from the version `job_id` is (or `from_version`), with
    the changes given, by a caller who may change the family; the new job's id."""
    with rt.store.begin() as conn:
        row = job_repo.get_job(conn, project_id, job_id)
        me = version_repo.ensure_version(conn, row)
        caller.may_change_job(project_id, submit.family_owner(conn, me))
        parent_v, parent = pick(conn, me, row, body.from_version)
        if body.resume and jobs.Phase(parent.phase) not in jobs.TERMINAL:
            raise errors.InvalidState(
                f"{versions.name(parent_v.number)} is {parent.phase}: a version can "
                "resume only from one that has ended")
        number = version_repo.take_number(conn, me.family_id)
        data, bases = versions.derive(json.loads(parent.spec), body, number,
                                      json.loads(parent_v.output_bases or "{}"),
                                      parent_number=parent_v.number)
        new_body = specs.parse(specs.JobCreate, data)
        new_id = submit.create_job(
            conn, rt.catalog, new_body, project_id=project_id, now=now, places=rt.places,
            user_name=caller.user_name, policy=rt.path_policy(conn, project_id),
            version=submit.NewVersion(family_id=me.family_id, number=number, parent=parent_v,
                                      resume=body.resume, output_bases=bases))
        job_repo.add_event(conn, new_id, now, f"Version {versions.name(number)} of "
                           f"{parent.name}, from {versions.name(parent_v.number)}"
                           + (", resuming from its outputs" if body.resume else ""))
        return new_id
