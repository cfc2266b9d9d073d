"""Shipping what a task on a Ray node reads to that node before it starts.

A task reads its input channels (the `--<channel>=` arguments: a local folder or file, or
the folder an `s3://` input was fetched to) and the job's model at the server's paths,
which exist on a Ray node only when the cluster shares the server's file system. So
unless `ray_shared_fs` says it does, the executor passes the task node-local paths
instead (`actor.INPUT` placeholders), and this module copies the files there while
the node's agent holds the task back: in pieces of at most CHUNK bytes (small files
several to a piece), a few pieces in flight at a time, so the server's memory stays
bounded whatever the inputs weigh. The task's log tells the progress.

The copy belongs to the job's attempt on that node: a gang's tasks there share it, and it
is shipped once (the agent says what it already holds, which is also how a restarted
server carries on with a copy it did not finish). The agent removes it with the last task
of the attempt there.

The server reads with its own rights, a task on its node with its user's: so symbolic
links inside an input are not followed (the input's own path may be one: it was checked
against the job's storage roots when the attempt was prepared), and when tasks run as
another user (`run_as`) only what that user could read here is shipped (by the modes of
what was opened; a user this machine does not know may read what anyone may). See
`folders`.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import dataclasses
import logging
import os
import stat
import threading
import time
from typing import Any, Protocol

from corral.domain import following
from corral.executors import base
from corral.executors.ray import actor, folders
from corral.oskit import walk

log = logging.getLogger(__name__)
#: bytes per call to the agent (one input file is several pieces; small ones share one)
CHUNK = 4 << 20
#: most pieces of a file per call
PIECES = 256
#: calls with pieces in flight per shipment
IN_FLIGHT = 4
#: seconds between progress lines in the task's log
PROGRESS_EVERY = 5.0
#: seconds an agent may take to answer a call
TIMEOUT = 120.0
#: shipments at once (each holds at most IN_FLIGHT + 1 calls' bytes)
WORKERS = 2


@dataclasses.dataclass(frozen=True)
class Inputs:
    """What a launch reads, as the server has it: input i at sources[i]. The last
    len(seeds) sources are output channels that already hold files (a resumed version's
    checkpoints, an earlier attempt's files): what output channel seeds[j] starts with."""

    key: str  #: the job's attempt: what its tasks on one node share
    sources: tuple[str, ...]
    seeds: tuple[int, ...] = ()
    #: (input, its folders that are the task's outputs) of each input the task follows:
    #: shipped and kept up to date by `follow`, not by the shipment
    follow: tuple[tuple[int, tuple[str, ...]], ...] = ()

    @property
    def reads(self) -> int:
        """How many of the sources are input channels (the rest are seeds)."""
        return len(self.sources) - len(self.seeds)

    def seed_pairs(self) -> list[tuple[int, int]]:
        """(input index on the node, output channel) of each seed."""
        return [(self.reads + j, out) for j, out in enumerate(self.seeds)]

    def places(self) -> list[tuple[str, str]]:
        """(server path, node path) of each input the server holds: a folder becomes the
        node's folder of input i; a file, the same name in it."""
        out = []
        for i, src in enumerate(self.sources[:self.reads]):
            if os.path.isdir(src):
                out.append((src, actor.INPUT % i))
            elif os.path.isfile(src):
                out.append((src, f"{actor.INPUT % i}/{os.path.basename(src)}"))
        return out

    def dumps(self) -> dict[str, Any]:
        return {"key": self.key, "sources": list(self.sources), "seeds": list(self.seeds),
                "follow": [[i, list(own)] for i, own in self.follow]}

    @classmethod
    def loads(cls, raw: Any) -> Inputs | None:
        if not isinstance(raw, dict) or not raw.get("sources"):
            return None
        return cls(key=str(raw["key"]), sources=tuple(str(s) for s in raw["sources"]),
                   seeds=tuple(int(i) for i in raw.get("seeds") or ()),
                   follow=tuple((int(i), tuple(str(o) for o in own))
                                for i, own in raw.get("follow") or ()))


class Pushes(Protocol):
    """A launch's followed inputs (`follow.Followed`)."""

    ready: bool  #: shipped: periodic pushes may begin

    def push(self) -> int:
        """Send the node what changed since the last push."""
        ...


def of(spec: base.LaunchSpec, seeds: tuple[int, ...] = ()) -> Inputs | None:
    """What the launch reads (and, `seeds`, the output channels whose files it starts
    with), or None when it needs nothing of the server's."""
    if not spec.input_dirs and not seeds:
        return None
    return Inputs(key=f"{spec.job_id}-{spec.attempt}",
                  sources=spec.input_dirs + tuple(spec.output_dirs[i] for i in seeds),
                  seeds=seeds,
                  follow=tuple((i, following.own_outputs(spec.input_dirs[i], spec.output_dirs))
                               for i in spec.follow))


def holding_files(dirs: tuple[str, ...]) -> tuple[int, ...]:
    """The indices of the folders that hold anything."""
    out = []
    for i, top in enumerate(dirs):
        with contextlib.suppress(OSError), os.scandir(top) as it:
            if next(it, None) is not None:
                out.append(i)
    return tuple(out)


@dataclasses.dataclass(frozen=True)
class _File:
    index: int
    rel: str
    path: str
    size: int
    mode: int
    mtime: int = 0  #: ns

    @property
    def key(self) -> str:
        return f"{self.index}/{self.rel}"


@dataclasses.dataclass
class Listing:
    files: list[_File] = dataclasses.field(default_factory=list)
    dirs: list[tuple[int, str]] = dataclasses.field(default_factory=list)
    #: what the tasks' user could not read here (not shipped)
    denied: list[str] = dataclasses.field(default_factory=list)

    def allowed(self, reader: walk.Reader | None, path: str, st: os.stat_result, bits: int) -> bool:
        if reader is None or reader.may(st, bits):
            return True
        self.denied.append(path)
        return False


def listing(sources: tuple[str, ...], reader: walk.Reader | None = None) -> Listing:
    """The regular files and the folders of every input that the tasks' user may read,
    links inside them not followed."""
    found = Listing()
    for i, src in enumerate(sources):
        if not os.path.exists(src):
            continue
        if reader is not None and not reader.reaches(src):
            found.denied.append(src)
            continue
        try:
            fd = os.open(src, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)  # its own links too
        except OSError:  # gone, or a socket
            continue
        try:
            st = os.fstat(fd)
            if stat.S_ISREG(st.st_mode):
                if found.allowed(reader, src, st, walk.READ):
                    found.files.append(_File(i, os.path.basename(src), src, st.st_size,
                                             st.st_mode, st.st_mtime_ns))
            elif stat.S_ISDIR(st.st_mode) and found.allowed(reader, src, st, walk.LIST):
                _walk(i, fd, src, reader, found)
        finally:
            os.close(fd)
    return found


def _walk(index: int, top: int, src: str, reader: walk.Reader | None, found: Listing) -> None:
    for e in walk.walk(top, reader):
        if e.why in walk.DENIED:
            found.denied.append(os.path.join(src, e.rel))
        elif e.why:  # links are not shipped, nor what is no regular file
            continue
        elif stat.S_ISDIR(e.st.st_mode):
            found.dirs.append((index, e.rel))
        elif stat.S_ISREG(e.st.st_mode):
            found.files.append(_File(index, e.rel, os.path.join(src, e.rel), e.st.st_size,
                                     e.st.st_mode, e.st.st_mtime_ns))


class Shipper:
    """Ships launches' inputs to their nodes, a few at a time, each (node, attempt) once."""

    def __init__(self, ray: Any, reader: walk.Reader | None = None) -> None:
        self._ray = ray
        self._reader = reader
        self._pool = concurrent.futures.ThreadPoolExecutor(
            WORKERS, thread_name_prefix="corral-ray-inputs")
        self._busy: set[tuple[str, str]] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()

    def ship(self, node_id: str, agent: Any, launch_id: str, inputs: Inputs,
             followed: Pushes | None = None) -> None:
        """Make sure the launch's inputs are (or get) on its node; returns at once.
        `followed`: its followed inputs, pushed before the task may start, and ready
        for their later pushes once the shipment is done."""
        key = (node_id, inputs.key)
        with self._lock:
            if key in self._busy:  # a task of the same attempt there is shipping them
                return
            self._busy.add(key)
        try:
            self._pool.submit(self._run, key, agent, launch_id, inputs, followed)
        except RuntimeError:  # closing
            with self._lock:
                self._busy.discard(key)

    def close(self) -> None:
        self._stop.set()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _fail(self, agent: Any, launch_id: str, why: str) -> None:
        """The task is told it will not get its inputs: it fails, saying why."""
        if self._stop.is_set():
            return  # closing: whatever went wrong may be that, and the next server retries
        log.warning("inputs of %s cannot be shipped: %s", launch_id, why)
        with contextlib.suppress(self._ray.exceptions.RayError):
            self._ray.get(agent.input_done.remote(launch_id, error=why), timeout=TIMEOUT)

    def _run(self, key: tuple[str, str], agent: Any, launch_id: str, inputs: Inputs,
             followed: Pushes | None) -> None:
        ray = self._ray
        try:
            _Shipment(ray, agent, launch_id, inputs, self._stop, followed).run(self._reader)
        except _Stopped:
            pass  # the server is closing: the next one carries on where this one stopped
        except ray.exceptions.GetTimeoutError:
            self._fail(agent, launch_id, f"the node took over {TIMEOUT:g} s to take a piece")
        except ray.exceptions.RayError as exc:  # the agent is gone, or retired the task
            log.info("inputs of %s not shipped: %s", launch_id, _gist(exc))
        except Exception as exc:  # the server cannot read them, say
            self._fail(agent, launch_id, _gist(exc))
        finally:
            with self._lock:
                self._busy.discard(key)


class _Stopped(Exception):
    """The shipper is closing."""


class _Shipment:
    """One launch's inputs on their way: pieces batched into calls, a few calls in flight."""

    def __init__(self, ray: Any, agent: Any, launch_id: str, inputs: Inputs,
                 stop: threading.Event, followed: Pushes | None = None) -> None:
        self.ray, self.agent, self.launch_id = ray, agent, launch_id
        self.inputs, self.stop, self.followed = inputs, stop, followed
        self.pending: collections.deque[Any] = collections.deque()
        self.batch: list[tuple[int, str, int, int, int, bytes]] = []
        self.room = CHUNK
        self.sent = self.files_sent = 0
        self.said = time.monotonic()
        self.reader: walk.Reader | None = None  #: whose rights bound what is read

    def run(self, reader: walk.Reader | None) -> None:
        ray, agent, launch = self.ray, self.agent, self.launch_id
        self.reader = reader
        have = ray.get(agent.input_have.remote(launch), timeout=TIMEOUT)
        if have["complete"]:
            self._follow_from_now()
            return  # shipped before (by this server or the one before it)
        started = time.monotonic()
        found = listing(self.inputs.sources, reader)
        pushed = {i for i, _own in self.inputs.follow}
        found.files = [f for f in found.files if f.index not in pushed]
        found.dirs = [d for d in found.dirs if d[0] not in pushed]
        todo = [f for f in found.files if have["files"].get(f.key) != f.size]
        total = sum(f.size for f in todo)
        if found.denied:
            self.pending.append(agent.input_note.remote(launch, (
                f"corral: not copied to this node, as the task's user may not read them "
                f"(or they have a second name): "
                f"{len(found.denied)} file(s) or folder(s), {found.denied[0]} first")))
        if found.dirs:
            self.pending.append(agent.input_dirs.remote(launch, found.dirs))
        for f in todo:
            self._file(f, len(todo), total)
        self._flush()
        while self.pending:
            ray.get(self.pending.popleft(), timeout=TIMEOUT)
        if self.followed is not None:
            self.followed.push()
        text = (f"corral: inputs copied to this node: {len(todo)} file(s), "
                f"{total / 1e6:.1f} MB in {time.monotonic() - started:.1f} s") if todo else ""
        ray.get(agent.input_done.remote(launch, text), timeout=TIMEOUT)
        self._follow_from_now()

    def _follow_from_now(self) -> None:
        if self.followed is not None:
            self.followed.ready = True

    def _file(self, f: _File, count: int, total: int) -> None:
        try:
            fd = self._open(f)
        except FileNotFoundError:
            return  # gone since it was listed
        with open(fd, "rb") as fh:
            offset = 0
            while True:
                data = fh.read(min(self.room, f.size - offset)) if offset < f.size else b""
                self.batch.append((f.index, f.rel, f.size, f.mode, offset, data))
                self.room -= len(data)
                offset += len(data)
                self.sent += len(data)
                if self.room <= 0 or len(self.batch) >= PIECES:
                    self._flush()
                    self._progress(count, total)
                if offset >= f.size or not data:  # whole (or it shrank meanwhile)
                    break
        self.files_sent += 1

    def _open(self, f: _File) -> int:
        """An input file as it was listed, whatever was done meanwhile: see `folders`."""
        src = self.inputs.sources[f.index]
        return folders.open_named(src, "" if f.path == src else f.rel, self.reader)

    def _flush(self) -> None:
        if self.stop.is_set():
            raise _Stopped
        if self.batch:
            self.pending.append(self.agent.input_write.remote(self.launch_id, self.batch))
            self.batch, self.room = [], CHUNK
        while len(self.pending) > IN_FLIGHT:
            self.ray.get(self.pending.popleft(), timeout=TIMEOUT)

    def _progress(self, count: int, total: int) -> None:
        if time.monotonic() - self.said < PROGRESS_EVERY:
            return
        self.said = time.monotonic()
        self.pending.append(self.agent.input_note.remote(self.launch_id, (
            f"corral: copying the inputs to this node: {self.files_sent}/{count} file(s), "
            f"{self.sent / 1e6:.1f}/{total / 1e6:.1f} MB")))


def _gist(exc: BaseException) -> str:
    """The line of an error that says what went wrong (Ray's put the cause last)."""
    lines = [ln for ln in str(exc).strip().splitlines() if ln.strip()]
    return lines[-1] if lines else type(exc).__name__
