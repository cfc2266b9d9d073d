"""SQL for datasets: index files of samples and how many samples each holds, and their
versions (the samples frozen as they were, for jobs to read).

Functions run on a connection the caller owns and never commit.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa

from corral.domain import errors, jobs, versions
from corral.store import kind_rows, kind_tables, schema

DATASETS = kind_tables.datasets
VERSIONS = kind_tables.dataset_versions
LOOPS = kind_tables.il_loops
JOBS = schema.jobs


class DatasetNotFound(errors.NotFound):
    """The dataset does not exist."""


class VersionNotFound(errors.NotFound):
    """The dataset version does not exist."""


def insert(conn: sa.Connection, values: Mapping[str, Any]) -> str:
    """Insert a dataset (its id is made here); DuplicateName when the name is taken."""
    name = values["name"]
    if _find(conn, values["project_id"], name) is not None:
        raise errors.DuplicateName(f"a dataset named '{name}' already exists")
    dataset_id = str(uuid.uuid4())
    try:
        conn.execute(DATASETS.insert().values(id=dataset_id, **values))
    except sa.exc.IntegrityError:  # taken by a concurrent insert since the check
        raise errors.DuplicateName(f"a dataset named '{name}' already exists") from None
    return dataset_id


def get(conn: sa.Connection, project_id: str, ref: str) -> kind_rows.Dataset:
    """The project's dataset with this id or name, or DatasetNotFound."""
    found = _find(conn, project_id, ref, by_id=True)
    if found is None:
        raise DatasetNotFound(f"dataset '{ref}' does not exist")
    return found


def by_id(conn: sa.Connection, dataset_id: str, *, lock: bool = False) -> kind_rows.Dataset | None:
    """Any project's dataset; `lock` holds its row until the transaction ends."""
    q = sa.select(DATASETS).where(DATASETS.c.id == dataset_id)
    r = conn.execute(q.with_for_update() if lock else q).first()
    return None if r is None else kind_rows.Dataset.of(r)


def _find(conn: sa.Connection, project_id: str, ref: str, *,
          by_id: bool = False) -> kind_rows.Dataset | None:
    key = DATASETS.c.name == ref
    if by_id:
        key = sa.or_(key, DATASETS.c.id == ref)
    r = conn.execute(sa.select(DATASETS).where(DATASETS.c.project_id == project_id, key)
                     .order_by(sa.desc(DATASETS.c.id == ref))).first()
    return None if r is None else kind_rows.Dataset.of(r)


def list_datasets(conn: sa.Connection, project_id: str) -> list[kind_rows.Dataset]:
    q = sa.select(DATASETS).where(DATASETS.c.project_id == project_id).order_by(DATASETS.c.name)
    return kind_rows.Dataset.all(conn.execute(q))


def set_count(conn: sa.Connection, dataset_id: str, *, number: int, stamp: str | None,
              now: int) -> None:
    """The number of samples, counted from the file as `stamp` describes it."""
    conn.execute(DATASETS.update().where(DATASETS.c.id == dataset_id).values(
        number_of_samples=number, stamp=stamp, checked_at=now, updated_at=now))


def set_checked(conn: sa.Connection, dataset_id: str, now: int) -> None:
    conn.execute(DATASETS.update().where(DATASETS.c.id == dataset_id).values(checked_at=now))


def delete(conn: sa.Connection, dataset_id: str) -> list[str]:
    """Delete the dataset and its versions' rows; returns where the versions' files are.
    Refused while a loop watches it or a job that has not ended reads one of its versions."""
    users = loops_using(conn, dataset_id)
    if users:
        raise errors.InvalidState(f"the dataset is used by incremental-learning job(s) "
                                  f"{', '.join(users)}: delete them first")
    readers = jobs_reading(conn, dataset_id)
    if readers:
        raise errors.InvalidState(f"training job(s) {', '.join(readers)} read a version of "
                                  "the dataset and have not ended (or not yet registered "
                                  "their model): wait for them, or stop them, first")
    found = versions_of(conn, dataset_id)
    conn.execute(VERSIONS.delete().where(VERSIONS.c.dataset_id == dataset_id))
    conn.execute(DATASETS.delete().where(DATASETS.c.id == dataset_id))
    return [v.location for v in found]


def loops_using(conn: sa.Connection, dataset_id: str) -> list[str]:
    q = sa.select(LOOPS.c.name).where(LOOPS.c.dataset_id == dataset_id).order_by(LOOPS.c.name)
    return [str(n) for n in conn.execute(q).scalars()]


def jobs_reading(conn: sa.Connection, dataset_id: str,
                 version_id: str | None = None) -> list[str]:
    """The names of the jobs not deleted that read a version of the dataset (`version_id`,
    or any) and have not ended, or ended but are not finished yet: the model a job is
    registered as, after it ends, records the content hash and samples of the versions it
    read (their rows)."""
    q = (sa.select(JOBS.c.name, JOBS.c.spec)
         .where(sa.or_(JOBS.c.phase.not_in([p.value for p in jobs.TERMINAL]),
                       JOBS.c.finalized_at.is_(None)),
                JOBS.c.deleted_at.is_(None), JOBS.c.spec.contains(dataset_id))
         .order_by(JOBS.c.name))
    out = []
    for name, spec in conn.execute(q):
        inputs = json.loads(spec).get("algorithm", {}).get("inputs", [])
        refs = [ch.get("remote", {}).get("dataset") or {} for ch in inputs]
        if any(ref.get("id") == dataset_id
               and version_id in (None, ref.get("version_id")) for ref in refs):
            out.append(str(name))
    return out


# --- versions -------------------------------------------------------------------------------


def next_number(conn: sa.Connection, dataset_id: str) -> int:
    """The number the dataset's next version takes (one more than its last's)."""
    last = conn.execute(sa.select(sa.func.max(VERSIONS.c.number))
                        .where(VERSIONS.c.dataset_id == dataset_id)).scalar()
    return int(last or 0) + 1


def insert_version(conn: sa.Connection, values: Mapping[str, Any]) -> kind_rows.DatasetVersion:
    """Insert a version: `values` are its columns, with `files` a list (stored as JSON);
    InvalidState when its number was taken meanwhile."""
    row = {**values, "files": json.dumps(values["files"])}
    try:
        conn.execute(VERSIONS.insert().values(**row))
    except sa.exc.IntegrityError:
        raise errors.InvalidState("another version of the dataset was made meanwhile; try "
                                  "again") from None
    made = version_by_id(conn, row["id"])
    assert made is not None
    return made


def version_by_id(conn: sa.Connection, version_id: str) -> kind_rows.DatasetVersion | None:
    r = conn.execute(sa.select(VERSIONS).where(VERSIONS.c.id == version_id)).first()
    return None if r is None else kind_rows.DatasetVersion.of(r)


def version_ids(conn: sa.Connection, dataset_id: str) -> set[str]:
    """The ids of every version of the dataset, deleted ones too."""
    q = sa.select(VERSIONS.c.id).where(VERSIONS.c.dataset_id == dataset_id)
    return set(conn.execute(q).scalars())


def versions_of(conn: sa.Connection, dataset_id: str) -> list[kind_rows.DatasetVersion]:
    """The dataset's versions (not those deleted), oldest first."""
    q = (sa.select(VERSIONS).where(VERSIONS.c.dataset_id == dataset_id,
                                   VERSIONS.c.deleted_at.is_(None))
         .order_by(VERSIONS.c.number))
    return kind_rows.DatasetVersion.all(conn.execute(q))


def get_version(conn: sa.Connection, dataset: kind_rows.Dataset,
                ref: str) -> kind_rows.DatasetVersion:
    """A version of `dataset` by its id, name (V0002) or number, or VersionNotFound (a
    version of another dataset is none of this one's)."""
    key = VERSIONS.c.id == ref
    if versions.VERSION_RE.match(ref):
        key = sa.or_(key, VERSIONS.c.number == versions.parse(ref))
    r = conn.execute(sa.select(VERSIONS).where(VERSIONS.c.dataset_id == dataset.id, key,
                                               VERSIONS.c.deleted_at.is_(None))
                     .order_by(sa.desc(VERSIONS.c.id == ref))).first()
    if r is None:
        raise VersionNotFound(f"dataset '{dataset.name}' has no version '{ref}'")
    return kind_rows.DatasetVersion.of(r)


def delete_version(conn: sa.Connection, dataset: kind_rows.Dataset, ref: str,
                   now: int) -> kind_rows.DatasetVersion:
    """Mark a version of `dataset` (by id, name or number) deleted; it is no longer listed
    nor read, and its number is not given again. Refused while a job that has not ended
    (or not yet registered its model) reads it."""
    found = get_version(conn, dataset, ref)
    readers = jobs_reading(conn, dataset.id, found.id)
    if readers:
        raise errors.InvalidState(f"training job(s) {', '.join(readers)} read version "
                                  f"{versions.name(found.number)} of the dataset and have "
                                  "not ended (or not yet registered their model): wait for "
                                  "them, or stop them, first")
    conn.execute(VERSIONS.update().where(VERSIONS.c.id == found.id).values(deleted_at=now))
    return found
