"""Files wherever they live: local folders and S3-compatible object stores, through fsspec.

Channels, code, log exports and the model store may be local paths or `s3://bucket/key`
URLs (`obs://` is the same thing by another name). Which endpoint and credentials an
`s3://` URL of a project uses comes from the server's settings (`s3`, `project_s3`), never
from a job; one filesystem object is made per configured store and reused.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import re
import shutil
import tarfile
import threading
from collections.abc import Callable, Iterator
from typing import Any

from corral import settings as settings_mod
from corral.domain import errors

REMOTE_SCHEMES = ("s3://", "obs://")
#: names of the folders versions 2, 3, ... of a job write into, under the first's output
VERSION_DIR = re.compile(r"^V\d{4,}\Z")
#: (files done, files in all, bytes done, bytes in all)
Progress = Callable[[int, int, int, int], None]
#: a file's (size, mtime in ns), to tell which files changed since the last upload
Seen = dict[str, tuple[int, int]]


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
        """Where `url` is: a filesystem and a path in it."""
        if is_remote(url):
            return Location(url, self.fs(project_id), bucket_key(url), remote=True)
        import fsspec

        return Location(url, fsspec.filesystem("file"), str(_local(url)), remote=False)


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

    def child(self, rel: str) -> str:
        return f"{self.path.rstrip('/')}/{rel}" if rel else self.path

    def files(self, *, skip_versions: bool = False) -> dict[str, int]:
        """relative path -> size of every file under this folder (or this one file)."""
        if self.remote:
            self.fs.invalidate_cache()
        if not self.fs.exists(self.path):
            raise FileNotFoundError(f"{self.url} does not exist")
        if not self.fs.isdir(self.path):
            return {pathlib.PurePosixPath(self.path).name: int(self.fs.size(self.path) or 0)}
        found = self.fs.find(self.path, detail=True)
        base = self.path.rstrip("/") + "/"
        out = {}
        for full, info in sorted(found.items()):
            full = full if self.remote else str(full)
            rel = full[len(base):] if full.startswith(base) else full.lstrip("/")
            if info.get("type") == "directory" or not rel:
                continue
            if skip_versions and VERSION_DIR.match(rel.split("/", 1)[0]):
                continue
            out[rel] = int(info.get("size") or 0)
        return out


def copy_tree(src: Location, dst: Location, *, progress: Progress | None = None,
              skip_versions: bool = False) -> tuple[int, int]:
    """Copy every file of `src` into the folder `dst`; returns (files, bytes)."""
    files = src.files(skip_versions=skip_versions)
    single = not src.fs.isdir(src.path)
    total = sum(files.values())
    done_bytes = 0
    for i, (rel, size) in enumerate(files.items(), 1):
        _copy_file(src.path if single else src.child(rel), src, dst.child(rel), dst)
        done_bytes += size
        if progress:
            progress(i, len(files), done_bytes, total)
    return len(files), total


def _copy_file(src_path: str, src: Location, dst_path: str, dst: Location) -> None:
    if not src.remote and not dst.remote:
        pathlib.Path(dst_path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src_path, dst_path)
    elif not src.remote:
        dst.fs.put_file(src_path, dst_path)
    elif not dst.remote:
        pathlib.Path(dst_path).parent.mkdir(parents=True, exist_ok=True)
        src.fs.get_file(src_path, dst_path)
    else:
        with src.fs.open(src_path, "rb") as r, dst.fs.open(dst_path, "wb") as w:
            shutil.copyfileobj(r, w, 1024 * 1024)


def upload_changed(local_dir: pathlib.Path, dst: Location, seen: Seen) -> int:
    """Upload the files of `local_dir` that changed since `seen` (updated in place)."""
    count = 0
    if not local_dir.is_dir():
        return 0
    for path in sorted(p for p in local_dir.rglob("*") if p.is_file()):
        st = path.stat()
        rel = path.relative_to(local_dir).as_posix()
        mark = (st.st_size, st.st_mtime_ns)
        if seen.get(rel) == mark:
            continue
        dst.fs.put_file(str(path), dst.child(rel))
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


def write_archive(src: Location, out: Any, top: str) -> None:
    """A gzipped tar of every file of `src`, under the folder name `top`, into `out`."""
    with tarfile.open(fileobj=out, mode="w|gz") as tar:
        for rel, size in src.files().items():
            info = tarfile.TarInfo(f"{top}/{rel}")
            info.size = size
            info.mode = 0o644
            with src.fs.open(src.child(rel), "rb") as fh:
                tar.addfile(info, fh)


def iter_file(path: pathlib.Path, chunk: int = 1024 * 1024) -> Iterator[bytes]:
    with path.open("rb") as fh:
        while data := fh.read(chunk):
            yield data
