"""Caching: a run whose job would be the same as an earlier successful one's reuses that
run's outputs instead of running.

Two runs are the same when their jobs' templates, parameters, code content and input
contents are: the code is hashed as a code snapshot is (`asuser.tree_hash`, less what a
snapshot leaves out), each input folder or file by content. What cannot be hashed here (a
code_dir or an input in object storage) turns caching off for that run, said in its event.
"""

from __future__ import annotations

import hashlib
import os

from corral.domain import specs
from corral.domain.pipelines import build
from corral.oskit import beneath
from corral.storage import asuser, objects, runs


class Uncacheable(Exception):
    """Why a run cannot be looked up in the cache."""


def key_of(body: specs.JobCreate) -> str:
    """The run's cache key (Uncacheable when its code or inputs cannot be hashed here)."""
    alg = body.algorithm
    code = _hash(alg.code_dir, "code_dir", runs.SNAPSHOT_IGNORE) if alg.code_dir else "-"
    inputs = {ch.name: _hash(ch.url, f"input '{ch.name}'") for ch in alg.inputs}
    return build.cache_key(body, code, inputs)


def _hash(url: str, what: str, ignore: tuple[str, ...] = ()) -> str:
    if objects.is_remote(url):
        raise Uncacheable(f"{what} is in object storage")
    path = runs.local_path(url, what)
    try:
        if os.path.isdir(path):
            fd = beneath.open_dir(path)
            try:
                return asuser.tree_hash(fd, ignore)
            finally:
                os.close(fd)
        fd = beneath.open_file(path)
        try:
            h = hashlib.sha256()
            while chunk := os.read(fd, beneath.CHUNK):
                h.update(chunk)
            return "sha256:" + h.hexdigest()
        finally:
            os.close(fd)
    except OSError as exc:
        raise Uncacheable(f"{what} cannot be read: {exc}") from None
