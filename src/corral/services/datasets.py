"""Datasets: made, counted, appended to, for the API and for the loops that read them.

A dataset's number of samples is known at all times: it is counted when the dataset is
made, kept up to date by each append through corral, and counted again whenever a check
finds its file changed (a file changed by hand, or appended to by a job). Local index
files must lie where the project may read and write (`confine`, the project's storage
roots); s3:// ones in a store the project has.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import pathlib
from collections.abc import Callable, Sequence

import sqlalchemy as sa

from corral.domain import errors, specs
from corral.storage import indexfiles, objects, wholefiles
from corral.store import dataset_repo, db, identity_repo, kind_rows

log = logging.getLogger(__name__)
#: (path, what it is) -> the resolved path, or BadParameter (paths.confine with a policy)
Confine = Callable[[str, str], pathlib.Path]
#: samples one append may add
MAX_APPEND = 100_000
MAX_LINE = 64 * 1024
#: seconds an append waits for the one before it on the same dataset
APPEND_WAIT_S = 30.0


def where(dataset: kind_rows.Dataset, stores: objects.Stores | None, confine: Confine
          ) -> indexfiles.Where:
    local = None
    if not objects.is_remote(dataset.url):
        local = unmoved(confine, dataset.url, f"dataset '{dataset.name}'")
    return indexfiles.Where(url=dataset.url, format=dataset.format, local=local,
                            stores=stores, project_id=dataset.project_id)


def unmoved(confine: Confine, path: str, what: str) -> pathlib.Path:
    """A local path stored resolved, still allowed, and still leading to itself: a link
    put in its place (or in its folders') since is refused, wherever it leads."""
    real = confine(path, what)
    if str(real) != path:
        raise errors.BadParameter(f"{what}: '{path}' now leads to '{real}' (a link was put "
                                  "in its way); refused")
    return real


def create(conn: sa.Connection, *, project_id: str, user_name: str, name: str, url: str,
           fmt: str | None, description: str, stores: objects.Stores | None,
           confine: Confine, now: int) -> str:
    """Make a dataset of the index file at `url` (which must exist: an empty file is a
    dataset of no samples yet) and count its samples; returns its id. (`examine`, then
    `insert`: a caller whose file may be slow to read examines it before its transaction.)"""
    return insert(conn, examine(project_id=project_id, name=name, url=url, fmt=fmt,
                                stores=stores, confine=confine),
                  user_name=user_name, description=description, now=now)


@dataclasses.dataclass(frozen=True)
class Examined:
    """An index file found fit to be a dataset, and its samples as read."""

    project_id: str
    name: str
    url: str
    format: str
    snap: indexfiles.Snapshot


def examine(*, project_id: str, name: str, url: str, fmt: str | None,
            stores: objects.Stores | None, confine: Confine) -> Examined:
    """Check a dataset to be made and read its file (no transaction: it may be remote)."""
    if not specs.NAME_RE.match(name):
        raise errors.BadParameter("dataset names are 1-64 letters, digits, '_' or '-'")
    fmt = indexfiles.format_of(url, fmt)
    if objects.is_remote(url):
        if stores is None:
            raise errors.BadParameter(f"dataset url '{url}': object storage is not "
                                      "available here")
        stores.require(url, "dataset url", project_id)
    else:
        if not os.path.isabs(url):
            raise errors.BadParameter(f"dataset url '{url}' must be an absolute path or an "
                                      "s3:// URL")
        path = confine(url, "dataset url")
        try:
            missing = wholefiles.stamp(path) is None
        except OSError as exc:
            raise errors.BadParameter(f"dataset url '{url}': {exc.strerror or exc}") from None
        if missing:
            raise errors.BadParameter(f"dataset url '{url}' does not exist: make the index "
                                      "file first (an empty one holds no samples yet)")
        url = str(path)
    found = indexfiles.Where(url=url, format=fmt, local=None if objects.is_remote(url)
                             else pathlib.Path(url), stores=stores, project_id=project_id)
    return Examined(project_id=project_id, name=name, url=url, format=fmt, snap=_read(found))


def insert(conn: sa.Connection, new: Examined, *, user_name: str, description: str,
           now: int) -> str:
    """The dataset's row, counted as examined; returns its id."""
    return dataset_repo.insert(conn, {
        "project_id": new.project_id, "name": new.name, "description": description,
        "url": new.url, "format": new.format, "number_of_samples": len(new.snap.samples),
        "stamp": new.snap.stamp, "checked_at": now, "user_name": user_name,
        "created_at": now, "updated_at": now})


def add(store: db.Store, new: Examined, *, user_name: str, description: str,
        now: int) -> kind_rows.Dataset:
    """Record an examined dataset in a transaction of its own (its project looked up
    again there); the dataset as stored."""
    with store.begin() as conn:
        identity_repo.require_project(conn, new.project_id)
        found = dataset_repo.by_id(conn, insert(conn, new, user_name=user_name,
                                                description=description, now=now))
    assert found is not None
    return found


def _read(found: indexfiles.Where) -> indexfiles.Snapshot:
    try:
        return indexfiles.read(found)
    except OSError as exc:
        raise errors.BadParameter(f"dataset url '{found.url}' cannot be read: "
                                  f"{exc.strerror or exc}") from None


def read(dataset: kind_rows.Dataset, stores: objects.Stores | None, confine: Confine
         ) -> indexfiles.Snapshot:
    """The dataset's samples as its file holds them now."""
    return _read(where(dataset, stores, confine))


def count_if_changed(conn: sa.Connection, dataset: kind_rows.Dataset,
                     snap: indexfiles.Snapshot | None, now: int) -> int:
    """Record the count of a snapshot read of the dataset's file (when its stamp differs
    from the one counted); returns the number of samples."""
    if snap is None or snap.stamp == dataset.stamp:
        dataset_repo.set_checked(conn, dataset.id, now)
        return dataset.number_of_samples
    dataset_repo.set_count(conn, dataset.id, number=len(snap.samples), stamp=snap.stamp,
                           now=now)
    return len(snap.samples)


def recount(store: db.Store, dataset: kind_rows.Dataset, snap: indexfiles.Snapshot | None,
            now: int) -> kind_rows.Dataset:
    """`count_if_changed` in a transaction of its own; the dataset as stored then."""
    with store.begin() as conn:
        count_if_changed(conn, dataset, snap, now)
        return dataset_repo.get(conn, dataset.project_id, dataset.id)


def changed(dataset: kind_rows.Dataset, stores: objects.Stores | None,
            confine: Confine) -> indexfiles.Snapshot | None:
    """The file's samples if it changed since it was counted, else None (a stat only)."""
    found = where(dataset, stores, confine)
    try:
        now_stamp = indexfiles.stamp(found)
    except OSError as exc:
        raise errors.BadParameter(f"dataset '{dataset.name}': {exc}") from None
    if now_stamp == dataset.stamp:
        return None
    return _read(found)


def check_lines(lines: Sequence[str]) -> list[str]:
    """Samples to append: non-empty lines without line breaks."""
    if len(lines) > MAX_APPEND:
        raise errors.BadParameter(f"at most {MAX_APPEND} samples at a time")
    out = []
    for i, line in enumerate(lines):
        if not isinstance(line, str) or not line.strip():
            raise errors.BadParameter(f"samples[{i}] is empty: a sample is a non-empty line")
        if "\n" in line or "\r" in line or len(line) > MAX_LINE:
            raise errors.BadParameter(f"samples[{i}]: a sample is one line of at most "
                                      f"{MAX_LINE} characters")
        out.append(line)
    return out


def append(store: db.Store, dataset_id: str, lines: Sequence[str],
           stores: objects.Stores | None, confine: Confine, now: int) -> int:
    """Append samples to the dataset's file and count them; returns the new number.

    Appends through corral take turns (`Store.turn`, which holds no row), and the file is
    written outside any write transaction: a write transaction is ended by the database
    once it has waited for its server a while (store/db.py), and one ended after the
    samples had landed would answer an error for samples that are there, which a retry
    would add twice. The count is recorded in a short transaction after the file is
    written; a server stopped between the two leaves the file's stamp unlike the one
    counted, and the next look at the dataset counts the file again, so nothing is lost.
    A file changed by other means meanwhile is counted again from scratch.
    """
    with store.turn(f"dataset {dataset_id}", APPEND_WAIT_S):
        with store.read() as conn:
            found = dataset_repo.by_id(conn, dataset_id)
        if found is None:
            raise dataset_repo.DatasetNotFound(f"dataset '{dataset_id}' does not exist")
        at = where(found, stores, confine)
        try:
            before = indexfiles.stamp(at)
            indexfiles.append(at, check_lines(lines))
            after = indexfiles.stamp(at)
        except OSError as exc:
            raise errors.BadParameter(f"dataset '{found.name}' cannot be appended to: "
                                      f"{exc.strerror or exc}") from None
        # Counted again from the file when it was changed by other means too, and for a
        # csv file (whose first line, perhaps this append's, is its header).
        snap = _read(at) if before != found.stamp or found.format == "csv" else None
        number = len(snap.samples) if snap is not None else found.number_of_samples + len(lines)
        try:
            with store.begin() as conn:
                dataset_repo.set_count(conn, found.id, number=number,
                                       stamp=snap.stamp if snap is not None else after, now=now)
        except sa.exc.DBAPIError as exc:
            # The samples are in: an error would have them sent again. The stamp left as
            # it was has the file counted again at the next look.
            log.warning("dataset %s: %d sample(s) appended, count not recorded: %s",
                        found.name, len(lines), str(exc).splitlines()[0])
        return number
