"""Dataset versions: a dataset's samples frozen as they were, for jobs to read.

A version is a copy of the dataset's index file as it was read (its samples, after a csv
file's header), written once into a folder of its own with a manifest of its files (path,
size, sha256) and a content hash over them. The folder is in CORRAL_HOME for a local index
file (`datasets/<project>/<dataset>/<version>/`, outside every project's storage roots),
and beside a remote one in its store (`<index file URL>.versions/<version>/`).

A copy, not a hard link: appends, corral's and anyone's, write the index file's own inode
(`wholefiles.append`), so a link would show the version every later sample; and the copy
of a file of lines is small. A job that reads a version gets a copy of its own, checked
against the hashes the database holds as it is made (`fetch`): nothing written to the
version's folder afterwards, by hand or by a job, reaches a job unnoticed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import logging
import pathlib
import uuid
from collections.abc import Callable, Sequence
from typing import Any, BinaryIO, cast

import sqlalchemy as sa

from corral.domain import errors, identity, specs, versions
from corral.services import datasets
from corral.storage import indexfiles, objects
from corral.store import dataset_repo, db, kind_rows

log = logging.getLogger(__name__)
MANIFEST = "manifest.json"


def samples_file(fmt: str) -> str:
    """The name of a version's copy of the index file: samples.txt or samples.csv."""
    return f"samples.{fmt}"


def versions_root(home: pathlib.Path, dataset: kind_rows.Dataset) -> str:
    """Where the dataset's versions are kept."""
    if objects.is_remote(dataset.url):
        return f"{dataset.url}.versions"
    return str(home / "datasets" / dataset.project_id / dataset.id)


def content_hash(files: Sequence[dict[str, Any]]) -> str:
    """One hash of a version's files: of each one's path, size and sha256."""
    h = hashlib.sha256()
    for f in sorted(files, key=lambda f: f["path"]):
        h.update(f"{f['path']}\0{f['size']}\0{f['sha256']}\n".encode())
    return f"sha256:{h.hexdigest()}"


def open_location(stores: objects.Stores | None, url: str, project_id: str) -> objects.Location:
    """A version's folder: in the project's object store, or a folder of the server's."""
    if objects.is_remote(url):
        if stores is None:
            raise errors.BadParameter(f"'{url}': object storage is not available here")
        return stores.open(url, project_id)
    return objects.local(url)


@dataclasses.dataclass(frozen=True)
class Made:
    """A version as made: its row and its dataset."""

    dataset: kind_rows.Dataset
    version: kind_rows.DatasetVersion


def create(store: db.Store, stores: objects.Stores | None, home: pathlib.Path, *,
           project_id: str, ref: str, description: str, user_name: str,
           confine: datasets.Confine, now: Callable[[], int]) -> Made:
    """Freeze the samples the dataset (by id or name) holds now as its next version.

    Made in the dataset's turn, as appends are, so that no append through corral is half
    read; its files are written before its row, and removed again when the row cannot be.
    """
    with store.read() as conn:
        found = dataset_repo.get(conn, project_id, ref)
    with store.turn(f"dataset {found.id}", datasets.APPEND_WAIT_S):
        snap = datasets.read(found, stores, confine)
        if snap.stamp is None and snap.header is None and not snap.samples:
            raise errors.BadParameter(f"dataset '{found.name}': its index file {found.url} "
                                      "does not exist")
        _drop_half_made(store, stores, home, found)
        with store.read() as conn:
            number = dataset_repo.next_number(conn, found.id)
        data = indexfiles.render(snap.header, snap.samples)
        values = _row(found, data, len(snap.samples), number=number, home=home,
                      description=description, user_name=user_name, now=now())
        try:
            _write(open_location(stores, values["location"], project_id), found, data, values)
            with store.begin() as conn:
                if dataset_repo.by_id(conn, found.id, lock=True) is None:
                    raise dataset_repo.DatasetNotFound(f"dataset '{ref}' was deleted meanwhile")
                made = dataset_repo.insert_version(conn, values)
                datasets.count_if_changed(conn, found, snap, values["created_at"])
        except BaseException:
            remove(stores, project_id, [values["location"]])
            raise
    return Made(dataset=found, version=made)


def _drop_half_made(store: db.Store, stores: objects.Stores | None, home: pathlib.Path,
                    dataset: kind_rows.Dataset) -> None:
    """Remove what a server killed while it made a version of `dataset` left: a folder
    named as a version's id that no version has (a deleted version keeps its row). Run
    in the dataset's turn, when no version of it is being made."""
    root = versions_root(home, dataset)
    try:
        names = {rel.split("/", 1)[0]
                 for rel in open_location(stores, root, dataset.project_id).files()}
    except FileNotFoundError:
        return
    with store.read() as conn:
        names -= dataset_repo.version_ids(conn, dataset.id)
    remove(stores, dataset.project_id,
           [objects.join(root, name) for name in sorted(names) if _is_version_id(name)])


def _is_version_id(name: str) -> bool:
    try:
        return str(uuid.UUID(name)) == name
    except ValueError:
        return False


def _row(dataset: kind_rows.Dataset, data: bytes, samples: int, *, number: int,
         home: pathlib.Path, description: str, user_name: str, now: int) -> dict[str, Any]:
    """The columns of a version of `dataset` holding the index file `data`."""
    files = [{"path": samples_file(dataset.format), "size": len(data),
              "sha256": hashlib.sha256(data).hexdigest()}]
    version_id = str(uuid.uuid4())
    return {"id": version_id, "dataset_id": dataset.id, "project_id": dataset.project_id,
            "number": number, "description": description, "format": dataset.format,
            "number_of_samples": samples, "size_bytes": len(data),
            "content_hash": content_hash(files), "files": files, "user_name": user_name,
            "created_at": now,
            "location": objects.join(versions_root(home, dataset), version_id)}


def _write(where: objects.Location, dataset: kind_rows.Dataset, data: bytes,
           values: dict[str, Any]) -> None:
    try:
        where.write(samples_file(dataset.format), io.BytesIO(data))
        where.write(MANIFEST, io.BytesIO(manifest(dataset, values)))
    except OSError as exc:
        raise errors.BadParameter(f"dataset '{dataset.name}': its version cannot be written "
                                  f"to {values['location']}: {exc.strerror or exc}") from None


def manifest(dataset: kind_rows.Dataset, values: dict[str, Any]) -> bytes:
    """The manifest written beside a version's files (and given to each job that reads it)."""
    return json.dumps({
        "dataset": {"id": dataset.id, "name": dataset.name, "url": dataset.url,
                    "format": dataset.format},
        "version": {"id": values["id"], "name": versions.name(values["number"]),
                    "number": values["number"], "description": values["description"],
                    "created_at": values["created_at"], "user_name": values["user_name"]},
        "number_of_samples": values["number_of_samples"],
        "files": values["files"], "content_hash": values["content_hash"],
    }, indent=2).encode() + b"\n"


def delete(store: db.Store, stores: objects.Stores | None, home: pathlib.Path,
           project_id: str, ref: str, caller: identity.Principal) -> None:
    """Forget a dataset (by id or name) the caller may change, and remove its versions'
    files once their rows are gone (its index file stays); refused while a loop uses it.
    A local index file's versions folder in CORRAL_HOME goes whole: with it what a server
    killed while making a version left there."""
    with store.begin() as conn:
        found = dataset_repo.get(conn, project_id, ref)
        caller.may_change_job(project_id, found.user_name, "dataset")
        locations = dataset_repo.delete(conn, found.id)
    remove(stores, project_id, locations)
    if not objects.is_remote(found.url):
        remove(stores, project_id, [versions_root(home, found)])


def delete_version(store: db.Store, stores: objects.Stores | None, project_id: str,
                   ref: str, version: str, caller: identity.Principal,
                   now: Callable[[], int]) -> None:
    """Delete one version (by id, name or number) of a dataset the caller may change, and
    its files; refused while a job that has not ended reads it. Its number is not given to
    another version (models' lineage names versions by it)."""
    with store.begin() as conn:
        found = dataset_repo.get(conn, project_id, ref)
        caller.may_change_job(project_id, found.user_name, "dataset")
        gone = dataset_repo.delete_version(conn, found, version, now())
    remove(stores, project_id, [gone.location])


def remove(stores: objects.Stores | None, project_id: str, locations: Sequence[str]) -> None:
    """Remove versions' folders (their rows are gone); what cannot be removed is logged."""
    for location in locations:
        try:
            objects.remove_tree(open_location(stores, location, project_id))
        except (OSError, errors.CorralError) as exc:
            log.warning("could not remove dataset version files at %s: %s", location, exc)


# --- jobs that read versions ----------------------------------------------------------------


def pin(conn: sa.Connection, inputs: Sequence[specs.Input], project_id: str) -> None:
    """Pin each input that names a dataset version: its ids, names and `obs_url` (where the
    version's files are) filled in; BadParameter, naming the input, for a dataset or a
    version this project does not have."""
    for ch in inputs:
        ref = ch.dataset
        if ref is None:
            continue
        assert ref.id is not None and ref.version_id is not None
        try:
            found = dataset_repo.get(conn, project_id, ref.id)
            version = dataset_repo.get_version(conn, found, ref.version_id)
        except errors.NotFound as exc:  # a reference in the body: the body is wrong
            raise errors.BadParameter(f"input '{ch.name}': {exc.message} in this "
                                      "project") from None
        ref.id, ref.version_id, ref.obs_url = found.id, version.id, version.location
        ref.name, ref.version_name = found.name, versions.name(version.number)


def lineage(conn: sa.Connection, spec: specs.JobCreate) -> list[dict[str, Any]]:
    """The dataset versions a job read, for the model versions it is registered as."""
    out = []
    for ch in spec.algorithm.inputs:
        ref = ch.dataset
        if ref is None:
            continue
        row = dataset_repo.version_by_id(conn, ref.version_id or "")
        out.append({"channel": ch.name, "dataset_id": ref.id, "dataset_name": ref.name,
                    "version_id": ref.version_id, "version_name": ref.version_name,
                    "content_hash": row.content_hash if row else None,
                    "number_of_samples": row.number_of_samples if row else None})
    return out


class Changed(errors.CorralError):
    """A dataset version's files are not what they were when it was made."""


def fetch(store: db.Store, stores: objects.Stores | None, project_id: str,
          ref: specs.DatasetRef, dest: objects.Location) -> kind_rows.DatasetVersion:
    """Copy a version's files into a job's folder `dest`, each checked against the size and
    sha256 recorded when the version was made (Changed when one differs), and its manifest
    beside them, written from what the database holds."""
    with store.read() as conn:
        row = dataset_repo.version_by_id(conn, ref.version_id or "")
        dataset = dataset_repo.by_id(conn, row.dataset_id) if row else None
    if row is None or dataset is None or row.deleted_at is not None:
        raise errors.BadParameter(f"dataset '{ref.name}' version {ref.version_name} no longer "
                                  "exists (it, or its dataset, was deleted)")
    src = open_location(stores, row.location, project_id)
    files: list[dict[str, Any]] = json.loads(row.files)
    for f in files:
        with src.open_read(f["path"]) as fh:
            reader = _Hashing(fh)
            dest.write(f["path"], cast(BinaryIO, reader))
        if (reader.size, reader.sha256.hexdigest()) != (f["size"], f["sha256"]):
            raise Changed(f"dataset '{dataset.name}' version {versions.name(row.number)}: "
                          f"{f['path']} at {row.location} was changed since the version was "
                          "made (its size or sha256 differs); make a new version")
    dest.write(MANIFEST, io.BytesIO(manifest(dataset, {**dataclasses.asdict(row),
                                                       "files": files})))
    return row


class _Hashing:
    """A reader that hashes and counts what is read through it."""

    def __init__(self, raw: BinaryIO) -> None:
        self.raw, self.size, self.sha256 = raw, 0, hashlib.sha256()

    def read(self, n: int = -1) -> bytes:
        chunk = self.raw.read(n)
        self.sha256.update(chunk)
        self.size += len(chunk)
        return chunk
