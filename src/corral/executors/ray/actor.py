"""The small Ray actor that runs tasks' processes on one node of a Ray cluster.

One agent per node, named after the node and detached (it outlives a server restart, and
the next server finds it by name). For each task it waits until the task's placement group
holds the flavor's resources on its node, unpacks the attempt's code (shipped through the
object store), starts the process with its output in a file on the node, and answers the
server's questions (has it ended, what did it print, how busy is it, which files has it
written) until the server retires the task. Everything of a task lives in a scratch
directory of its own on the node: its code, its output channels and its metrics file,
which the server copies back to where the job's channels say. Its input channels are
copied here by the server before it starts, once per job attempt and node (a gang's tasks
on one node share them), and go with the last of those tasks. A long-lived agent instead
of an actor per task: starting an actor starts a Python worker process (about half a
second here), which a trivial job should not pay for.

The scratch directories of one agent's tasks are in a folder of the agent's own
(`corral-<namespace>-<agent name>` in the node's temp dir). An agent that starts empties
its folder (the tasks of an agent that died on this node died with it) and removes the
folders of agents on nodes the cluster no longer has (a node restarted on this machine
comes back with a new id).

This module uses only the standard library, psutil (which Ray itself depends on) and
`corral.oskit`: the executor ships them to the nodes by value, so a node needs Ray but not
corral.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import io
import os
import pwd
import shutil
import signal
import stat
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from typing import Any

from corral.oskit import beneath, procs, walk

#: argv[0] placeholder: the node's own Python (the one running the actor)
NODE_PYTHON = "{node-python}"
#: path prefix placeholders: the unpacked code snapshot, and the task's own directory
CODE = "{code}"
ROOT = "{root}"
#: the placeholder of output channel i: "{output:i}"
OUTPUT = "{output:%d}"
#: the placeholder of input i: "{input:i}"
INPUT = "{input:%d}"
LAUNCH_ENV = "CORRAL_LAUNCH_ID"
NODE_ENV = "CORRAL_RAY_NODE_ID"
PR_SET_PDEATHSIG = 1
#: retired launch ids remembered (a late call about one fails instead of waiting for ever)
RETIRED_KEPT = 100_000


def _death_signal() -> Any:
    """A pre-exec hook making the task die with its actor (and so with its node, as on a
    real machine). Resolved before the fork: the child must only make the call."""
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    return lambda: prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


@dataclasses.dataclass
class _Proc:
    root: str
    log_path: str
    outputs: list[str] = dataclasses.field(default_factory=list)  #: by channel index
    metrics: str = ""  #: the file the task reports metrics to
    inputs: str = ""  #: the key of the inputs it reads ("" when none are copied)
    group: str = ""  #: the name of the placement group that reserves its resources
    #: the files its output channels started with: (channel, path) -> (size, mtime_ns)
    seeded: dict[tuple[int, str], tuple[int, int]] = dataclasses.field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None
    exit_code: int | None = None
    ended: threading.Event = dataclasses.field(default_factory=threading.Event)
    cpu_prev: tuple[float, float] | None = None


@dataclasses.dataclass
class _Inputs:
    """A job attempt's input channels on this node (input i in root/i), for its tasks here."""

    root: str
    count: int
    users: set[str] = dataclasses.field(default_factory=set)  #: launch ids reading them
    ready: threading.Event = dataclasses.field(default_factory=threading.Event)
    error: str = ""  #: why they will not all arrive
    whole: dict[str, int] = dataclasses.field(default_factory=dict)  #: "i/path" -> size
    #: files partly here: "i/path" -> {offset: length} of the pieces written
    parts: dict[str, dict[int, int]] = dataclasses.field(default_factory=dict)
    owner: tuple[int, int] | None = None  #: the user they were given to

    def path(self, index: int, rel: str) -> str:
        return _inside(os.path.join(self.root, str(index)), rel)


class NodeAgent:
    """Starts tasks' processes on this node; the server then polls and retires them."""

    def __init__(self) -> None:
        import ray

        ctx = ray.get_runtime_context()
        self.node_id: str = ctx.get_node_id()
        self.scratch = _scratch(str(ctx.namespace or ""), str(ctx.get_actor_name() or ""),
                                self.node_id, _dead_nodes(ray))
        self._lock = threading.Condition()
        self._tasks: dict[str, _Proc] = {}
        #: launch ids that must never start (abandoned, or retired), oldest first
        self._abandoned: dict[str, None] = {}
        self._inputs: dict[str, _Inputs] = {}

    def start(self, launch_id: str, payload: dict[str, Any], code: bytes | None) -> bool:
        """Start a task once its resources are reserved; False if it was abandoned first.

        With `payload["inputs"]` it also waits for its inputs, which the server copies
        (among them, what its output channels already hold: `seeds`)."""
        with self._lock:
            if launch_id in self._abandoned or launch_id in self._tasks:
                return launch_id in self._tasks
            root = tempfile.mkdtemp(prefix=f"corral-{payload['task']}-{launch_id}-",
                                    dir=self.scratch)
            p = self._tasks[launch_id] = _Proc(root, os.path.join(root, "task.log"),
                                               group=str(payload.get("group_name") or ""))
            if payload.get("inputs"):
                self._use_inputs(launch_id, p, payload["inputs"])
            self._lock.notify_all()
        try:
            group = payload.get("group")
            while group is not None and not _placed(group):
                # The placement group is not placed yet: the task waits for it, unless it
                # is retired meanwhile (its group may then never be placed).
                with self._lock:
                    if launch_id not in self._tasks:
                        return True
            if p.inputs and not self._inputs_ready(launch_id, p):
                return True  # retired while it waited
            self._spawn(launch_id, p, payload, code)
        except (OSError, tarfile.TarError, ValueError, KeyError) as exc:
            # Reported as a shell reports a command it cannot run: in the log, code 127.
            with contextlib.suppress(OSError), open(p.log_path, "ab") as fh:
                fh.write(f"corral: cannot start {payload['task']}: {exc}\n".encode())
            p.exit_code = 127
            p.ended.set()
        return True

    def _use_inputs(self, launch_id: str, p: _Proc, want: dict[str, Any]) -> None:
        """Count the task among the readers of its attempt's inputs (made on first use)."""
        p.inputs = str(want["key"])
        inp = self._inputs.get(p.inputs)
        if inp is None:
            root = tempfile.mkdtemp(prefix=f"corral-inputs-{p.inputs}-", dir=self.scratch)
            inp = self._inputs[p.inputs] = _Inputs(root, int(want["count"]))
            for i in range(inp.count):
                os.makedirs(os.path.join(root, str(i)), exist_ok=True)
        inp.users.add(launch_id)

    def _inputs_ready(self, launch_id: str, p: _Proc) -> bool:
        """Wait until the task's inputs are all here; False if it was retired meanwhile."""
        with self._lock:
            inp = self._inputs.get(p.inputs)
        if inp is None:
            return False
        while not inp.ready.wait(1.0):
            with self._lock:
                if launch_id not in self._tasks:
                    return False
        if inp.error:
            raise OSError(f"its inputs did not reach this node: {inp.error}")
        return True

    def _spawn(self, launch_id: str, p: _Proc, payload: dict[str, Any],
               code: bytes | None) -> None:
        user = _task_user(payload.get("run_as"))
        inp = self._inputs.get(p.inputs) if p.inputs else None
        code_dir = os.path.join(p.root, "code")
        if code is not None:
            with tarfile.open(fileobj=io.BytesIO(code)) as tar:
                tar.extractall(code_dir, filter="data")
        p.outputs = [os.path.join(p.root, "outputs", str(i))
                     for i in range(len(payload["outputs"]))]
        inputs = [os.path.join(inp.root, str(i)) for i in range(inp.count)] if inp else []
        seeds = [(inputs[i], out) for i, out in (payload.get("inputs") or {}).get("seeds", ())]
        seeds += [(path, out) for out, path in payload.get("seed_dirs", ())]
        for src, out in seeds:  # what its output channels held: its own copy
            shutil.copytree(src, p.outputs[out], symlinks=True, dirs_exist_ok=True)
        p.seeded = dict(_files_of(p.outputs)) if seeds else {}

        def local(value: str) -> str:
            for i, out in enumerate(p.outputs):
                value = value.replace(OUTPUT % i, out)
            for i, there in enumerate(inputs):
                value = value.replace(INPUT % i, there)
            return value.replace(CODE, code_dir).replace(ROOT, p.root)

        argv = [local(a) for a in payload["argv"]]
        if argv and argv[0] == NODE_PYTHON:
            argv[0] = sys.executable
        for out in p.outputs:
            os.makedirs(out, exist_ok=True)
        p.metrics = local(payload.get("metrics", ""))
        if p.metrics:
            os.makedirs(os.path.dirname(p.metrics), exist_ok=True)
        env = {k: local(v) for k, v in payload["env"].items()}
        env.update({LAUNCH_ENV: launch_id, NODE_ENV: self.node_id})
        cwd = local(payload["cwd"])
        os.makedirs(cwd, exist_ok=True)
        if payload["shell"]:
            # The command line, then its arguments as "$@" (as the local launcher runs it).
            argv = ["/bin/sh", "-c", argv[0] + ' "$@"', "sh", *argv[1:]]
        if user is not None:  # what the task writes to (and reads) must be its user's
            _give(p.root, user)
            if inp is not None and inp.owner != user:
                _give(inp.root, user)
                inp.owner = user
        uid, gid = user or (None, None)
        with open(p.log_path, "ab") as log, self._lock:
            if launch_id not in self._tasks:
                return  # retired while it was being prepared: it must not run
            p.proc = subprocess.Popen(
                argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True, close_fds=True,
                preexec_fn=_death_signal(), user=uid, group=gid,
                extra_groups=[] if user is not None else None)
        threading.Thread(target=self._reap, args=(p,), daemon=True).start()

    @staticmethod
    def _reap(p: _Proc) -> None:
        assert p.proc is not None
        rc = p.proc.wait()
        p.exit_code = 128 - rc if rc < 0 else rc
        # Whatever the task left in its group goes with it.
        with contextlib.suppress(OSError):
            os.killpg(p.proc.pid, signal.SIGKILL)
        p.ended.set()

    # --- what the server asks -----------------------------------------------------------

    def _task(self, launch_id: str) -> _Proc:
        with self._lock:
            # A `wait` may overtake its `start` (whose code argument is still on its way).
            while launch_id not in self._tasks and launch_id not in self._abandoned:
                self._lock.wait()
            if launch_id not in self._tasks:
                raise KeyError(f"task {launch_id} is not (or no longer) on this node")
            return self._tasks[launch_id]

    def state(self, launch_id: str) -> str:
        """"unknown", "running" or "ended", without waiting."""
        with self._lock:
            p = self._tasks.get(launch_id)
        return "unknown" if p is None else "ended" if p.ended.is_set() else "running"

    def groups(self) -> list[str]:
        """The placement groups of the tasks here whose process has not ended. A task that
        has ended needs its group no more, whether or not a server has taken its end: one
        killed between recording the end and telling this agent (`finish`) would otherwise
        leave its group holding the node's resources for as long as this agent lives."""
        with self._lock:
            return sorted({p.group for p in self._tasks.values()
                           if p.group and not p.ended.is_set()})

    def abandon(self, launch_id: str) -> bool:
        """Make sure a launch never starts; True if it had not (it never will now)."""
        with self._lock:
            if launch_id in self._tasks:
                return False
            self._never(launch_id)
            return True

    def _never(self, launch_id: str) -> None:
        """(lock held) Remember that the launch must not start, and wake its waiters."""
        self._abandoned[launch_id] = None
        while len(self._abandoned) > RETIRED_KEPT:
            del self._abandoned[next(iter(self._abandoned))]
        self._lock.notify_all()

    def wait(self, launch_id: str) -> int:
        """The exit code, once the process has ended (the server keeps one call pending)."""
        p = self._task(launch_id)
        p.ended.wait()
        assert p.exit_code is not None
        return p.exit_code

    def read_log(self, launch_id: str, offset: int, max_bytes: int) -> bytes:
        p = self._task(launch_id)
        try:
            fd = _open_below(p.root, os.path.relpath(p.log_path, p.root))
        except FileNotFoundError:
            return b""
        with os.fdopen(fd, "rb") as fh:
            fh.seek(offset)
            return fh.read(max_bytes)

    def listing(self, launch_id: str) -> dict[str, Any]:
        """What the task has written: its metrics file's size, and every regular file of its
        output channels as [channel, path in it, size, mtime_ns] (links are not followed:
        the agent must not read for a task what the task itself could not)."""
        p = self._task(launch_id)
        # What it started with and left as it was is on the server already.
        files = [[i, rel, *now] for (i, rel), now in _files_of(p.outputs)
                 if p.seeded.get((i, rel)) != now]
        size = 0
        if p.metrics:
            with contextlib.suppress(OSError):
                st = os.lstat(p.metrics)
                size = st.st_size if stat.S_ISREG(st.st_mode) else 0
        return {"metrics": size, "files": files}

    def read_file(self, launch_id: str, channel: int, rel: str, offset: int,
                  max_bytes: int) -> bytes:
        """Bytes of an output file (channel -1: the metrics file) from `offset`."""
        p = self._task(launch_id)
        path = p.metrics if channel < 0 else os.path.join(p.outputs[channel], rel)
        try:
            fd = _open_below(p.root, os.path.relpath(path, p.root))
        except FileNotFoundError:
            return b""
        with os.fdopen(fd, "rb") as fh:
            fh.seek(offset)
            return fh.read(max_bytes)

    def signal(self, launch_id: str, force: bool) -> None:
        """SIGTERM the task's group, or SIGKILL it and every process carrying its marker."""
        with self._lock:
            p = self._tasks.get(launch_id)
        _signal(launch_id, p, force)

    def sample(self, launch_id: str) -> tuple[float, float] | None:
        """(CPU percent of one core, resident MiB) of the task's whole process tree."""
        import psutil

        with self._lock:
            p = self._tasks.get(launch_id)
        if p is None or p.proc is None or p.ended.is_set():
            return None
        try:
            top = psutil.Process(p.proc.pid)
            tree = [top, *top.children(recursive=True)]
        except psutil.Error:
            return None
        cpu = rss = 0.0
        for q in tree:
            with contextlib.suppress(psutil.Error):
                t = q.cpu_times()
                cpu += t.user + t.system
                rss += q.memory_info().rss
        now = time.time()
        prev = p.cpu_prev or (top.create_time(), 0.0)
        p.cpu_prev = (now, cpu)
        pct = max(0.0, (cpu - prev[1]) / (now - prev[0]) * 100.0) if now > prev[0] else 0.0
        return pct, rss / 2**20

    def finish(self, launch_id: str) -> None:
        """The server is done with the task: nothing of it and its files stays (nor its
        inputs, once no other task here reads them)."""
        with self._lock:
            # Gone from the table first: a task still being prepared then never starts.
            p = self._tasks.pop(launch_id, None)
            self._never(launch_id)  # a late `start` must not run it, nor a call wait for it
            key = p.inputs if p is not None else ""
            inp = self._inputs.get(key) if key else None
            if inp is not None:
                inp.users.discard(launch_id)
                if not inp.users:
                    del self._inputs[key]
        _signal(launch_id, p, force=True)
        if p is not None:
            if p.proc is None and not p.ended.is_set():  # it never ran, and never will:
                p.exit_code = 128 + signal.SIGKILL  # a `wait` for it ends as if killed
                p.ended.set()
            shutil.rmtree(p.root, ignore_errors=True)
        if inp is not None and not inp.users:
            shutil.rmtree(inp.root, ignore_errors=True)
            shutil.rmtree(inp.root + ".new", ignore_errors=True)

    # --- inputs, copied here by the server ------------------------------------------------

    def _inputs_of(self, launch_id: str) -> _Inputs:
        with self._lock:
            p = self._tasks.get(launch_id)
            inp = self._inputs.get(p.inputs) if p is not None and p.inputs else None
        if inp is None:
            raise KeyError(f"task {launch_id} reads no inputs on this node (any more)")
        return inp

    def input_have(self, launch_id: str) -> dict[str, Any]:
        """What of the task's inputs is here: {"complete": bool, "files": {"i/path": size}}
        (waits for its `start`, which may still be on its way)."""
        self._task(launch_id)
        inp = self._inputs_of(launch_id)
        with self._lock:
            return {"complete": inp.ready.is_set() and not inp.error,
                    "files": dict(inp.whole), "root": inp.root}

    def input_dirs(self, launch_id: str, dirs: list[tuple[int, str]]) -> None:
        inp = self._inputs_of(launch_id)
        for index, rel in dirs:
            os.makedirs(inp.path(index, rel), exist_ok=True)

    def input_write(self, launch_id: str, pieces: list[tuple[int, str, int, int, int, bytes]],
                    replace: bool = False) -> None:
        """Write pieces of input files: (input, path in it, file size, mode, offset, bytes).
        Pieces may come in any order; a file counts as here once all its bytes are.
        `replace` (a followed input, read by a running task): a file is made beside the
        inputs, its pieces in order, and renamed into place once whole."""
        inp = self._inputs_of(launch_id)
        for index, rel, size, mode, offset, data in pieces:
            key = f"{index}/{rel}"
            if key in inp.whole and not replace:
                continue
            if replace and offset == 0:
                inp.parts.pop(key, None)
            path = (_inside(inp.root + ".new", key.replace("/", "%")) if replace
                    else inp.path(index, rel))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.pwrite(fd, view, offset + len(data) - len(view)):]
                with self._lock:
                    got = inp.parts.setdefault(key, {})
                    got[offset] = len(data)
                    done = sum(got.values()) >= size
                    if done:
                        del inp.parts[key]
                if done:
                    os.ftruncate(fd, size)
                    os.fchmod(fd, 0o700 if mode & 0o100 else 0o600)
                    if replace:
                        _into_place(fd, path, inp.path(index, rel), inp.owner)
                    with self._lock:
                        inp.whole[key] = size
            finally:
                os.close(fd)

    def input_note(self, launch_id: str, text: str) -> None:
        """Say something about the inputs in the log of every task here that reads them."""
        inp = self._inputs_of(launch_id)
        with self._lock:
            logs = [self._tasks[u].log_path for u in inp.users if u in self._tasks]
        for path in logs:
            with contextlib.suppress(OSError), open(path, "ab") as fh:
                fh.write(text.encode() + b"\n")

    def input_done(self, launch_id: str, text: str = "", error: str = "") -> None:
        """All of the inputs are here (or, with `error`, never will be): their tasks go on."""
        inp = self._inputs_of(launch_id)
        if text:
            self.input_note(launch_id, text)
        inp.error = error
        inp.ready.set()


def _into_place(fd: int, made: str, dest: str, owner: tuple[int, int] | None) -> None:
    """A file made whole beside the inputs, renamed to `dest` in a folder a running task
    may change: reached through no link it put there, and given to its user."""
    if owner is not None:
        os.fchown(fd, *owner)
    folder = beneath.open_dir(os.path.dirname(dest), make=True)
    try:
        os.rename(made, os.path.basename(dest), dst_dir_fd=folder)
    finally:
        os.close(folder)


def _placed(group: Any) -> bool:
    """Whether a task's placement group is placed, waiting a minute at most. One removed
    before it was placed (a starting server's sweep took it for no one's) fails the start:
    the task would otherwise wait for it, and its job run, for ever."""
    try:
        return bool(group.wait(60))
    except Exception as exc:  # (Ray raises a bare Exception: "... does not exist")
        raise OSError(f"its reservation of resources is gone ({exc})") from None


def _dead_nodes(ray: Any) -> set[str] | None:
    """The ids of the nodes that were in the cluster and left; None when it cannot say
    now."""
    try:
        return {str(n["NodeID"]) for n in ray.nodes() if not n.get("Alive")}
    except Exception:
        return None


def _scratch(namespace: str, agent: str, node_id: str, dead: set[str] | None) -> str:
    """This agent's folder for its tasks' scratch directories, emptied; the folders of
    agents on the cluster's nodes that left (`dead`; of the same namespace, made by the
    same user) go. Agents' names end with their node's id. A folder of a node the cluster
    never had is left alone: another Ray cluster's agent on this machine works there."""
    top = tempfile.gettempdir()
    ns = "".join(c if c.isalnum() or c in "-_." else "_" for c in namespace) or "default"
    prefix = f"corral-{ns}-"
    mine = os.path.join(top, prefix + (agent or f"agent-{node_id}"))
    if dead is not None:  # (unknown: no other node's folder is removed)
        with contextlib.suppress(OSError):
            for name in os.listdir(top):
                if name.startswith(prefix) and name.rsplit("-", 1)[-1] in dead:
                    _remove_own(os.path.join(top, name))
    _remove_own(mine)
    try:
        os.mkdir(mine, 0o711)  # tasks run as another user pass through it to their own
    except FileExistsError:  # not ours (or not a folder): a folder of our own instead
        return tempfile.mkdtemp(prefix=os.path.basename(mine) + "-", suffix="-" + node_id)
    return mine


def _remove_own(path: str) -> None:
    """Remove a folder this user made (not one another user made, nor a link)."""
    with contextlib.suppress(OSError):
        st = os.lstat(path)
        if stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid():
            shutil.rmtree(path, ignore_errors=True)


def _open_below(top: str, rel: str) -> int:
    """File `rel` of the agent's folder `top` for reading, as `walk.open_below` opens it: a
    task may put links in its folder, and the agent must not read for it what it could not."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        return walk.open_below(fd, rel, shown=top)
    finally:
        os.close(fd)


def _files_of(outputs: list[str]) -> list[tuple[tuple[int, str], tuple[int, int]]]:
    """Every regular file of the output channels: ((channel, path in it), (size, mtime_ns));
    links are not followed (the agent must not read for a task what it could not)."""
    files = []
    for i, top in enumerate(outputs):
        if os.path.islink(top) or os.path.islink(os.path.dirname(top)):
            continue  # (what is read is opened below the task's folder: `_open_below`)
        for root, dirs, names in os.walk(top):
            dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(root, d))]
            for name in names:
                full = os.path.join(root, name)
                with contextlib.suppress(OSError):
                    st = os.lstat(full)
                    if stat.S_ISREG(st.st_mode):
                        files.append(((i, os.path.relpath(full, top)),
                                      (st.st_size, st.st_mtime_ns)))
    return files


def _signal(launch_id: str, p: _Proc | None, force: bool) -> None:
    if p is not None and p.proc is not None:
        with contextlib.suppress(OSError):
            os.killpg(p.proc.pid, signal.SIGKILL if force else signal.SIGTERM)
    if force:
        _kill_marked(launch_id)


def _inside(top: str, rel: str) -> str:
    """`rel` under `top`, refused when it would lead out of it."""
    path = os.path.normpath(os.path.join(top, rel))
    if path != top and not path.startswith(top + os.sep):
        raise ValueError(f"{rel!r} is not inside {top}")
    return path


def _task_user(name: str | None) -> tuple[int, int] | None:
    """(uid, gid) to start a task as: the `run_as` user when this agent runs as root; the
    rules of the local executor, checked on the node (whose users are its own)."""
    if name is None:
        return None
    try:
        pw = pwd.getpwnam(name)
    except KeyError:
        raise ValueError(f"run_as: there is no user '{name}' on this node") from None
    if pw.pw_uid == os.geteuid():
        return None
    if os.geteuid() != 0:
        raise ValueError(f"run_as '{name}' needs Ray to run as root on this node")
    return pw.pw_uid, pw.pw_gid


def _give(top: str, owner: tuple[int, int]) -> None:
    os.lchown(top, *owner)
    for root, dirs, files in os.walk(top):
        for name in (*dirs, *files):
            os.lchown(os.path.join(root, name), *owner)


def _kill_marked(launch_id: str) -> None:
    for pid in procs.carrying(f"{LAUNCH_ENV}={launch_id}".encode()):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
