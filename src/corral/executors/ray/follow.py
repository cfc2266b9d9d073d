"""Inputs a task on a Ray node follows (`LaunchSpec.follow`): its node's copy kept up to date.

A task reads its inputs on its node in the copy shipped there (`inputs`). An input it
follows (a loop's service reads the models deployed to it there) is shipped by `push`
instead, before the task starts, and `push` brings it up to date every `files.INTERVAL`
while the task runs, by the rules of `domain.following`: the files changed since the last
push, whole (made beside the inputs and renamed into place by the agent), oldest first; a
small file naming the input's folder on the server names the node's copy instead; what
lies in one of the task's own output channels is left out. Files are read as the
shipment reads them (`folders`: no link followed, the tasks' user's rights).

What the node has is known to this server only: a restarted server pushes the whole input
once more at its first push, which changes nothing the task reads.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from typing import Any

from corral.domain import following
from corral.executors.ray import folders, inputs
from corral.oskit import walk

#: seconds an agent may take to take a piece
TIMEOUT = 120.0


@dataclasses.dataclass
class Followed:
    """A launch's followed inputs: where they are on the server, what its node has."""

    ray: Any
    reader: walk.Reader | None  #: whose rights bound what is read (`folders`)
    launch_id: str
    agent: Any
    sources: dict[int, str]  #: input index -> its folder (or file) on the server
    own: dict[int, tuple[str, ...]]  #: input index -> its folders that are outputs
    root: str = ""  #: the node's folder of the attempt's inputs (input i in root/i)
    ready: bool = False  #: shipped (periodic pushes may begin)
    seen: dict[str, tuple[int, int]] = dataclasses.field(default_factory=dict)
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)

    @classmethod
    def of(cls, ray: Any, reader: walk.Reader | None, launch_id: str, agent: Any,
           shipped: inputs.Inputs | None) -> Followed | None:
        if shipped is None or not shipped.follow:
            return None
        return cls(ray, reader, launch_id, agent,
                   {i: shipped.sources[i] for i, _own in shipped.follow},
                   {i: tuple(own) for i, own in shipped.follow})

    def push(self) -> int:
        return push(self)


def push(f: Followed) -> int:
    """Send the node what changed in the followed inputs since the last push; returns how
    many files. Raises what Ray raises when the agent cannot be asked."""
    ray, reader = f.ray, f.reader
    with f.lock:
        if not f.root:
            f.root = str(ray.get(f.agent.input_have.remote(f.launch_id), timeout=TIMEOUT)["root"])
        changed: dict[str, tuple[int, Any]] = {}
        for i, src in f.sources.items():
            for x in inputs.listing((src,), reader).files:
                key = f"{i}/{x.rel}"
                if not following.skipped(x.rel, f.own[i]) and f.seen.get(key) != (x.size,
                                                                                   x.mtime):
                    changed[key] = (i, x)
        done = 0
        for key in following.order((k, x.mtime) for k, (_i, x) in changed.items()):
            i, x = changed[key]
            if _send(ray, f, i, x, reader):
                done += 1
            f.seen[key] = (x.size, x.mtime)
        return done


def _send(ray: Any, f: Followed, i: int, x: Any, reader: walk.Reader | None) -> bool:
    """One file, whole; False when it went away since it was listed."""
    src = f.sources[i]
    try:
        fd = folders.open_named(src, "" if x.path == src else x.rel, reader)
    except FileNotFoundError:
        return False
    with open(fd, "rb") as fh:
        if x.size <= following.REWRITE_MAX:
            here = os.path.dirname(src) if x.path == src else src
            data = following.rewrite(fh.read(), here, os.path.join(f.root, str(i)))
            _put(ray, f, [(i, x.rel, len(data), x.mode, 0, data)])
            return True
        offset = 0
        while chunk := fh.read(inputs.CHUNK):
            _put(ray, f, [(i, x.rel, x.size, x.mode, offset, chunk)])
            offset += len(chunk)
    return True


def _put(ray: Any, f: Followed, pieces: list[tuple[int, str, int, int, int, bytes]]) -> None:
    ray.get(f.agent.input_write.remote(f.launch_id, pieces, True), timeout=TIMEOUT)
