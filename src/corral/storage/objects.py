"""Files wherever they live: local folders and S3-compatible object stores, through fsspec.

Channels, code, log exports and the model store may be local paths or `s3://bucket/key`
URLs (`obs://` is the same thing by another name). Which endpoint and credentials an
`s3://` URL of a project uses comes from the server's settings (`s3`, `project_s3`), never
from a job; one filesystem object is made per configured store and reused.

A local folder is read and written without following a link below it (`trees`,
`oskit.beneath`): a folder a job can write is given by its real path, checked against the job's
storage roots just before (`local`), and a link or a file of the wrong kind inside it is
left out (`Location.skipped`) rather than followed.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import re
import shutil
import stat
import tarfile
import threading
from collections.abc import Callable
from typing import Any, BinaryIO

from corral import settings as settings_mod
from corral.domain import errors
from corral.oskit import beneath, walk
from corral.storage import trees

REMOTE_SCHEMES = ("s3://", "obs://")
#: names of the folders versions 2, 3, ... of a job write into, under the first's output
VERSION_DIR = re.compile(r"^V\d{4,}\Z")
#: (files done, files in all, bytes done, bytes in all)
Progress = Callable[[int, int, int, int], None]
#: a file's (size, mtime in ns), to tell which files changed since the last upload
Seen = dict[str, tuple[int, int]]
#: bytes per read and write of a copy
CHUNK = 1024 * 1024


def is_remote(url: str | None) -> bool:
    return bool(url) and str(url).startswith(REMOTE_SCHEMES)


def bucket_key(url: str) -> str:
    """`bucket/key` of an s3:// or obs:// URL, as s3fs names objects."""
    for scheme in REMOTE_SCHEMES:
        if url.startswith(scheme):
            rest = url[len(scheme):]
            if not rest.strip("/") or rest.startswith("/"):
                break
            return rest.strip("/")
    raise errors.BadParameter(f"'{url}' is not an s3:// URL with a bucket")


def join(url: str, *parts: str) -> str:
    """`url` with path parts added, keeping its scheme; ends without a slash."""
    base = url.rstrip("/")
    for part in parts:
        base = f"{base}/{part.strip('/')}"
    return base


def check_url(url: str, what: str) -> None:
    """Refuse a malformed object-storage URL (no bucket, '..' in its key)."""
    key = bucket_key(url)
    if any(p in ("..", ".") for p in key.split("/")):
        raise errors.BadParameter(f"{what} '{url}': '.' and '..' are not allowed in a key")


@dataclasses.dataclass
class Stores:
    """The filesystems of the configured object stores, made on first use."""

    settings: settings_mod.Settings
    _made: dict[str, Any] = dataclasses.field(default_factory=dict)
    _lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)

    def config(self, project_id: str, project_name: str | None = None,
               ) -> settings_mod.S3Config:
        cfg = self.settings.s3_for(project_id, project_name)
        if cfg is None:
            raise errors.BadParameter(
                "object storage is not configured for this project: set `s3` (or "
                "`project_s3`) in the server's settings to use s3:// or obs:// URLs")
        return cfg

    def require(self, url: str, what: str, project_id: str,
                project_name: str | None = None) -> None:
        """Refuse at submit an object-storage URL this project cannot use."""
        check_url(url, what)
        if self.settings.s3_for(project_id, project_name) is None:
            raise errors.BadParameter(
                f"{what} '{url}': object storage is not configured for this project (set "
                "`s3` or `project_s3` in the server's settings)")

    def fs(self, project_id: str, project_name: str | None = None) -> Any:
        cfg = self.config(project_id, project_name)
        key = cfg.model_dump_json()
        with self._lock:
            fs = self._made.get(key)
            if fs is None:
                fs = self._made[key] = _s3fs(cfg)
            return fs

    def open(self, url: str, project_id: str) -> Location:
        """Where `url` is: a filesystem and a path in it. A local `url` is a place of the
        server's (the model store): its own links are followed, none below it. A folder a
        job can write is a `local` one instead."""
        if is_remote(url):
            return Location(url, self.fs(project_id), bucket_key(url), remote=True)
        return dataclasses.replace(local(os.path.realpath(_local(url))), url=url)


def local(path: str | os.PathLike[str], reader: walk.Reader | None = None) -> Location:
    """A local folder (or file) a job can write, by its real path, checked against the
    job's storage roots just before: a link anywhere on it is refused. `reader`: the user
    tasks run as, when it is read on a job's behalf (what they may not read is left out)."""
    import fsspec

    return Location(os.fspath(path), fsspec.filesystem("file"), os.fspath(path),
                    remote=False, reader=reader)


def _s3fs(cfg: settings_mod.S3Config) -> Any:
    import s3fs

    return s3fs.S3FileSystem(
        key=cfg.access_key, secret=cfg.secret_key, token=cfg.session_token,
        client_kwargs={"endpoint_url": cfg.endpoint_url, "region_name": cfg.region},
        # Our own retries say what failed; botocore's would only make a failure slower.
        config_kwargs={"connect_timeout": cfg.connect_timeout, "read_timeout": 60,
                       "retries": {"max_attempts": 2}},
        skip_instance_cache=True, use_listings_cache=False,
    )


def _local(url: str) -> pathlib.Path:
    raw = url.removeprefix("file://")
    if not os.path.isabs(raw):
        raise errors.BadParameter(f"'{url}' must be an absolute path or an s3:// URL")
    return pathlib.Path(os.path.normpath(raw))


@dataclasses.dataclass
class Location:
    url: str
    fs: Any
    path: str
    remote: bool
    #: (local) whose rights bound what is read here (a folder read on a job's behalf)
    reader: walk.Reader | None = None
    #: (local) what the last listing left out, and why: links, files of another kind or
    #: with a second name, what the reader may not read
    skipped: dict[str, str] = dataclasses.field(default_factory=dict)

    def child(self, rel: str) -> str:
        return f"{self.path.rstrip('/')}/{rel}" if rel else self.path

    def is_dir(self) -> bool:
        """Whether this is a folder (locally: one itself, not a link to one)."""
        if self.remote:
            return bool(self.fs.isdir(self.path))
        try:
            return stat.S_ISDIR(os.lstat(self.path).st_mode)
        except FileNotFoundError:
            return False

    def files(self, *, skip_versions: bool = False) -> dict[str, int]:
        """relative path -> size of every file under this folder (or this one file)."""
        if not self.remote:
            return {rel: size for rel, (size, _t) in self.listing(skip_versions).items()}
        self.fs.invalidate_cache()
        if not self.fs.exists(self.path):
            raise FileNotFoundError(f"{self.url} does not exist")
        if not self.fs.isdir(self.path):
            return {pathlib.PurePosixPath(self.path).name: int(self.fs.size(self.path) or 0)}
        found = self.fs.find(self.path, detail=True)
        base = self.path.rstrip("/") + "/"
        out = {}
        for full, info in sorted(found.items()):
            rel = full[len(base):] if full.startswith(base) else full.lstrip("/")
            if info.get("type") == "directory" or not rel:
                continue
            if skip_versions and VERSION_DIR.match(rel.split("/", 1)[0]):
                continue
            out[rel] = int(info.get("size") or 0)
        return out

    def stamps(self) -> dict[str, tuple[int, str, float]]:
        """relative path -> (size, what changes when it changes, when it last changed in
        seconds since the epoch) of every file under this folder (remote: an object of its
        own is no folder, and is left out)."""
        if not self.remote:
            return {rel: (size, f"{size}:{t}", t / 1e9)
                    for rel, (size, t) in self.listing().items()}
        self.fs.invalidate_cache()
        found = self.fs.find(self.path, detail=True)  # (none: the folder holds nothing yet)
        base = self.path.rstrip("/") + "/"
        return {full[len(base):]: _stamp(int(info.get("size") or 0), info)
                for full, info in found.items()
                if full.startswith(base) and info.get("type") != "directory"}

    def listing(self, skip_versions: bool = False) -> dict[str, tuple[int, int]]:
        """(local) relative path -> (size, mtime in ns) of every regular file with a single
        name under this folder (or of this one file), links not followed (`skipped`)."""
        if not os.path.lexists(self.path):
            raise FileNotFoundError(f"{self.url} does not exist")
        if not self.is_dir():
            fd = trees.open_single(self.path, self.reader)
            try:
                st = os.fstat(fd)
            finally:
                os.close(fd)
            self.skipped = {}
            return {pathlib.PurePosixPath(self.path).name: (st.st_size, st.st_mtime_ns)}
        tree = trees.list_tree(self.path, self.reader, _is_version if skip_versions else None)
        self.skipped = tree.skipped
        return tree.files

    def open_read(self, rel: str) -> BinaryIO:
        """File `rel` of this folder ("": this file itself) for reading."""
        if self.remote:
            return self.fs.open(self.child(rel), "rb")
        fd = (trees.open_file(self.path, rel, self.reader) if rel
              else trees.open_single(self.path, self.reader))
        return os.fdopen(fd, "rb")

    def drop_unfinished(self) -> None:
        """Locally, remove the files under this folder that another process was writing
        (`write`) when it was killed; an object in object storage is whole or not there."""
        if not self.remote:
            beneath.drop_unfinished(self.path)

    def write(self, rel: str, src: BinaryIO) -> None:
        """File `rel` of this folder written anew from `src`. Locally its folders are made
        and opened without following a link, and it is written beside its name and
        renamed into it, never through what had the name."""
        if self.remote:
            with self.fs.open(self.child(rel), "wb") as out:
                shutil.copyfileobj(src, out, CHUNK)
            return
        parent, name = os.path.split(self.child(rel))
        beneath.make_dirs(parent)
        fd = beneath.open_dir(parent)
        try:
            beneath.replace(fd, name, lambda out: _fill(src, out))
        finally:
            os.close(fd)


def _stamp(size: int, info: dict[str, Any]) -> tuple[int, str, float]:
    """(size, ETag or the time, when) of an object, as s3fs describes it."""
    when: Any = info.get("LastModified")
    seconds = float(when.timestamp()) if hasattr(when, "timestamp") else 0.0
    return size, str(info.get("ETag") or f"{size}:{seconds}"), seconds


def _is_version(name: str) -> bool:
    return bool(VERSION_DIR.match(name))


def _fill(src: BinaryIO, out: int) -> None:
    while chunk := src.read(CHUNK):
        beneath.write_all(out, chunk)


def copy_tree(src: Location, dst: Location, *, progress: Progress | None = None,
              skip_versions: bool = False) -> tuple[int, int]:
    """Copy every file of `src` into the folder `dst`; returns (files, bytes). What a local
    `src` left out is in `src.skipped`."""
    files = src.files(skip_versions=skip_versions)
    single = not src.is_dir()
    total = sum(files.values())
    done_bytes = 0
    for i, (rel, size) in enumerate(files.items(), 1):
        with src.open_read("" if single else rel) as fh:
            dst.write(rel, fh)
        done_bytes += size
        if progress:
            progress(i, len(files), done_bytes, total)
    return len(files), total


def upload_changed(src: Location, dst: Location, seen: Seen) -> int:
    """Upload the files of local folder `src` that changed since `seen` (updated in place);
    what it left out is in `src.skipped`."""
    count = 0
    if not src.is_dir():
        return 0
    for rel, mark in src.listing().items():
        if seen.get(rel) == mark:
            continue
        try:
            with src.open_read(rel) as fh:
                dst.write(rel, fh)
        except FileNotFoundError:  # removed since it was listed
            continue
        except beneath.Refused as exc:  # made a link since it was listed
            src.skipped[rel] = exc.strerror or str(exc)
            continue
        seen[rel] = mark
        count += 1
    return count


def remove_tree(loc: Location) -> None:
    if loc.remote:
        loc.fs.invalidate_cache()
        if loc.fs.exists(loc.path):
            loc.fs.rm(loc.path, recursive=True)
    else:
        shutil.rmtree(loc.path, ignore_errors=True)


def write_archive(src: Location, out: BinaryIO, top: str) -> None:
    """A gzipped tar of every file of `src`, under the folder name `top`, into `out`."""
    with tarfile.open(fileobj=out, mode="w|gz") as tar:
        for rel, size in src.files().items():
            info = tarfile.TarInfo(f"{top}/{rel}")
            info.size = size
            info.mode = 0o644
            with src.open_read(rel) as fh:
                tar.addfile(info, fh)
