"""SQL for datasets: index files of samples and how many samples each holds.

Functions run on a connection the caller owns and never commit.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa

from corral.domain import errors
from corral.store import kind_rows, kind_tables

DATASETS = kind_tables.datasets
LOOPS = kind_tables.il_loops


class DatasetNotFound(errors.NotFound):
    """The dataset does not exist."""


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


def delete(conn: sa.Connection, dataset_id: str) -> None:
    users = loops_using(conn, dataset_id)
    if users:
        raise errors.InvalidState(f"the dataset is used by incremental-learning job(s) "
                                  f"{', '.join(users)}: delete them first")
    conn.execute(DATASETS.delete().where(DATASETS.c.id == dataset_id))


def loops_using(conn: sa.Connection, dataset_id: str) -> list[str]:
    q = sa.select(LOOPS.c.name).where(LOOPS.c.dataset_id == dataset_id).order_by(LOOPS.c.name)
    return [str(n) for n in conn.execute(q).scalars()]
