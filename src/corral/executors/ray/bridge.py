"""The Ray driver in a process of its own, behind the executor protocol.

A Ray driver cannot outlive its cluster: while the head (GCS) does not answer, its calls
block; after 60 s Ray ends the whole process; and a head that comes back as a new cluster
makes it abort. corral's server must keep serving its API and its other pools meanwhile,
so `cluster.RayExecutor` runs in a child process (`python -m corral.executors.ray.bridge`)
and the server talks to it over a socket pair. Nothing here imports Ray.

The bridge watches the cluster's address. When it stops answering (or the child dies), the
child is killed, the cluster's nodes leave the catalog, its tasks count as running for
`ray_lost_after` seconds and then as lost with their nodes (their jobs are queued again, as
when one node dies), and the bridge keeps trying; once the address answers again a new
child connects and adopts whatever still runs there. What had to be told to the cluster
meanwhile (retire these tasks) is told then.

The first connection must succeed within `ray_connect_timeout` or the server does not
start; an address nothing listens on fails at once, naming the address.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import itertools
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from multiprocessing import connection as mpc
from typing import Any

from corral.domain import errors, resources
from corral.executors import base

log = logging.getLogger(__name__)

#: seconds to wait for the child's answer, per method (others: DEFAULT_TIMEOUT)
TIMEOUTS = {"launch": 60.0, "adopt": 60.0, "poll": 60.0, "recover": 90.0, "nodes": 10.0,
            "sample": 10.0}
DEFAULT_TIMEOUT = 20.0
#: seconds between checks that the cluster's address answers
PROBE_EVERY = 1.0
#: checks in a row that must fail before the cluster counts as gone
PROBE_FAILURES = 3
#: seconds between tries to connect again (doubling up to RETRY_MAX when nothing to probe)
RETRY_EVERY = 2.0
RETRY_MAX = 30.0
#: what the child may be asked (the executor protocol, and forgetting an uncertain launch)
METHODS = frozenset({"nodes", "launch", "poll", "cancel", "adopt", "recover", "sample",
                     "node_usage", "clean_up", "release", "forget"})


class Unreachable(errors.CorralError):
    """The Ray cluster cannot be reached."""


class _Down(Exception):
    """The child is gone or did not answer in time."""


@dataclasses.dataclass(frozen=True)
class Options:
    address: str
    namespace: str = "corral"
    #: the user tasks run as on the nodes (applied by the node agents)
    run_as: str | None = None
    connect_timeout: float = 15.0
    lost_after: float = 60.0
    #: the nodes read inputs at the server's paths (nothing is shipped to them)
    shared_fs: bool = False


class RayBridge:
    """A Ray cluster's nodes, through a child process that is the cluster's driver."""

    def __init__(self, opts: Options) -> None:
        self.opts = opts
        self._wake: Callable[[], None] = lambda: None
        self._lock = threading.Lock()
        self._probe = _host_port(opts.address)
        _check_reachable(opts.address, self._probe, min(5.0, opts.connect_timeout))
        self._child: _Child | None = self._start_child()
        self._nodes: list[resources.Node] = []
        self._down_since: float | None = None
        self._why = ""
        self._lost: dict[str, base.Status] = {}  #: launches given up on here
        #: calls to make once the cluster answers again
        self._deferred: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self._stop = threading.Event()
        self._monitor = threading.Thread(target=self._watch, name="corral-ray-bridge",
                                         daemon=True)
        self._monitor.start()

    # --- the protocol --------------------------------------------------------------------

    def nodes(self) -> list[resources.Node]:
        child = self._live()
        if child is None:
            return []
        with contextlib.suppress(_Down):  # no answer: the last view, until the probe says
            self._nodes = child.call("nodes")
        return list(self._nodes)

    def set_waker(self, wake: Callable[[], None]) -> None:
        self._wake = wake

    def launch(self, spec: base.LaunchSpec) -> base.Handle:
        child = self._live()
        why = f"the Ray cluster at {self.opts.address} is unreachable ({self._why})"
        if child is not None:
            try:
                handle: base.Handle = child.call("launch", spec)
                return handle
            except _Down as exc:  # it may have started: retire it once the cluster answers
                self._defer("forget", spec)
                why = f"the Ray cluster at {self.opts.address} did not answer: {exc}"
        handle = _bare_handle(spec)
        with self._lock:
            self._lost[spec.launch_id] = base.Status(base.State.NODE_LOST, handle=handle,
                                                     message=why)
        self._wake()
        return handle

    def poll(self, handle: base.Handle) -> base.Status:
        return self._status("poll", handle)

    def adopt(self, handle: base.Handle) -> base.Status:
        return self._status("adopt", handle)

    def recover(self, spec: base.LaunchSpec) -> base.Status:
        child = self._live()
        if child is not None:
            with contextlib.suppress(_Down):
                status: base.Status = child.call("recover", spec)
                return status
        self._defer("forget", spec)
        return base.Status(base.State.NODE_LOST, handle=_bare_handle(spec), message=(
            f"the Ray cluster at {self.opts.address} is unreachable ({self._why})"))

    def cancel(self, handle: base.Handle, *, force: bool) -> None:
        # Unreachable: nothing to do now; a stop repeats its SIGKILL every pass until the
        # task ends or counts as lost.
        self._tell("cancel", handle, defer=False, force=force)

    def sample(self, handle: base.Handle) -> base.Sample | None:
        child = self._live()
        if child is None:
            return None
        try:
            sample: base.Sample | None = child.call("sample", handle)
            return sample
        except _Down:
            return None

    def node_usage(self) -> list[base.NodeUsage]:
        """Each node's use, as its agent reads it (none while the cluster is unreachable)."""
        child = self._live()
        if child is None:
            return []
        try:
            usage: list[base.NodeUsage] = child.call("node_usage")
            return usage
        except _Down:
            return []

    def clean_up(self, handle: base.Handle) -> None:
        self._tell("clean_up", handle, defer=True)

    def release(self, handle: base.Handle) -> None:
        with self._lock:
            self._lost.pop(handle.launch_id, None)
        self._tell("release", handle, defer=True)

    def close(self) -> None:
        self._stop.set()
        self._monitor.join(timeout=5)
        with self._lock:
            child, self._child = self._child, None
        if child is not None:
            child.close()

    # --- calls and their fallbacks -------------------------------------------------------

    def _live(self) -> _Child | None:
        with self._lock:
            child = self._child
        return child if child is not None and child.alive else None

    def _status(self, method: str, handle: base.Handle) -> base.Status:
        with self._lock:
            lost = self._lost.get(handle.launch_id)
        if lost is not None:
            return lost
        child = self._live()
        if child is not None:
            with contextlib.suppress(_Down):
                status: base.Status = child.call(method, handle)
                return status
        with self._lock:
            since = self._down_since
        if since is not None and time.monotonic() - since >= self.opts.lost_after:
            return base.Status(base.State.NODE_LOST, handle=handle, message=(
                f"the Ray cluster at {self.opts.address} has been unreachable for "
                f"{time.monotonic() - since:.0f} s ({self._why})"))
        # Not known yet: an adoption is asked again (launches.py), not taken as done.
        return base.Status(base.State.RUNNING, handle=handle, unsure=method == "adopt",
                           message=f"the Ray cluster at {self.opts.address} did not answer")

    def _tell(self, method: str, *args: Any, defer: bool, **kwargs: Any) -> None:
        child = self._live()
        if child is not None:
            try:
                child.call(method, *args, **kwargs)
                return
            except _Down:
                pass
        if defer:
            self._defer(method, *args, **kwargs)

    def _defer(self, method: str, *args: Any, **kwargs: Any) -> None:
        with self._lock:
            if len(self._deferred) < 100_000:
                self._deferred.append((method, args, kwargs))

    # --- watching the cluster ------------------------------------------------------------

    def _start_child(self) -> _Child:
        child = _Child(self.opts, lambda: self._wake())
        if child.probe:
            self._probe = child.probe
        return child

    def _watch(self) -> None:
        failures = 0
        retry_at, retry_gap = 0.0, RETRY_EVERY
        while not self._stop.wait(PROBE_EVERY):
            with self._lock:
                child = self._child
            if child is not None and child.alive:
                ok = self._probe is None or _answers(self._probe, PROBE_EVERY)
                failures = 0 if ok else failures + 1
                if failures >= PROBE_FAILURES:
                    self._went_down(f"{_addr(self._probe)} does not answer")
            elif child is not None:
                self._went_down(f"its driver process ended with code {child.exit_code()}")
                retry_at, retry_gap = 0.0, RETRY_EVERY
            elif time.monotonic() >= retry_at:
                if self._reconnect():
                    failures = 0
                    continue
                retry_at = time.monotonic() + retry_gap
                if self._probe is None:
                    retry_gap = min(retry_gap * 2, RETRY_MAX)

    def _went_down(self, why: str) -> None:
        with self._lock:
            child, self._child = self._child, None
            self._down_since = self._down_since or time.monotonic()
            self._why = why
            self._nodes = []
        log.warning("lost the Ray cluster at %s: %s; its tasks count as lost with their "
                    "nodes after %g s unless it answers again", self.opts.address, why,
                    self.opts.lost_after)
        if child is not None:
            child.kill()
        self._wake()

    def _reconnect(self) -> bool:
        if self._probe is not None and not _answers(self._probe, PROBE_EVERY):
            return False
        try:
            child = self._start_child()
        except Unreachable as exc:
            log.info("the Ray cluster at %s is still unreachable: %s", self.opts.address,
                     exc.message)
            return False
        with self._lock:
            self._child, deferred, self._deferred = child, self._deferred, []
            self._down_since = None
        log.warning("connected to the Ray cluster at %s again", self.opts.address)
        for method, args, kwargs in deferred:
            with contextlib.suppress(_Down, errors.CorralError, RuntimeError):
                child.call(method, *args, **kwargs)
        self._wake()
        return True


class _Child:
    """The driver process, the socket to it, and the answers it owes."""

    def __init__(self, opts: Options, wake: Callable[[], None]) -> None:
        ours, theirs = socket.socketpair()
        # It gets its options over the socket: corral's own settings (the server key among
        # them) stay out of its environment.
        env = {k: v for k, v in os.environ.items() if not k.startswith("CORRAL_")}
        with theirs:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", __name__, str(theirs.fileno())],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, env=env,
                start_new_session=True)  # the terminal's ^C is the server's to handle
        self.conn = mpc.Connection(ours.detach())
        self.alive = True
        self._wake = wake
        self._pending: dict[int, concurrent.futures.Future[Any]] = {}
        self._ids = itertools.count()
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self.probe = self._handshake(opts)
        self._reader = threading.Thread(target=self._read, name="corral-ray-reader",
                                        daemon=True)
        self._reader.start()

    def _handshake(self, opts: Options) -> tuple[str, int] | None:
        where = f"the Ray cluster at {opts.address}"
        try:
            self.conn.send(("init", opts.address, opts.namespace, opts.run_as,
                            opts.shared_fs))
            if not self.conn.poll(opts.connect_timeout):
                raise Unreachable(f"cannot reach {where} within {opts.connect_timeout:g} s "
                                  "(ray_connect_timeout)")
            msg = self.conn.recv()
        except (EOFError, OSError):
            self.kill()
            raise Unreachable(f"cannot reach {where}: its driver process ended with code "
                              f"{self.exit_code()}") from None
        except Unreachable:
            self.kill()
            raise
        if msg[0] != "ready":
            self.kill()
            raise Unreachable(f"cannot reach {where}: {msg[1]}")
        probe = msg[1].get("probe")
        return _host_port(probe) if probe else None

    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        if not self.alive:
            raise _Down("the driver process is gone")
        fut: concurrent.futures.Future[Any] = concurrent.futures.Future()
        key = next(self._ids)
        with self._lock:
            self._pending[key] = fut
        try:
            with self._send_lock:
                self.conn.send(("call", key, method, args, kwargs))
        except (OSError, ValueError) as exc:
            self._fail()
            raise _Down(f"the driver process is gone ({exc})") from None
        timeout = TIMEOUTS.get(method, DEFAULT_TIMEOUT)
        try:
            return fut.result(timeout)
        except concurrent.futures.TimeoutError:
            with self._lock:
                self._pending.pop(key, None)
            raise _Down(f"no answer to {method} in {timeout:g} s") from None

    def _read(self) -> None:
        while True:
            try:
                msg = self.conn.recv()
            except (EOFError, OSError):
                break
            if msg[0] == "wake":
                self._wake()
                continue
            _, key, ok, value = msg
            with self._lock:
                fut = self._pending.pop(key, None)
            if fut is None:
                continue
            if ok:
                fut.set_result(value)
            else:
                fut.set_exception(_rebuilt(value))
        self._fail()

    def _fail(self) -> None:
        self.alive = False
        with self._lock:
            pending, self._pending = self._pending, {}
        for fut in pending.values():
            fut.set_exception(_Down("the driver process ended"))

    def exit_code(self) -> int | None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            return self.proc.wait(timeout=1)
        return None

    def kill(self) -> None:
        self.alive = False
        with contextlib.suppress(OSError):
            self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        self.conn.close()
        self._fail()

    def close(self) -> None:
        """Let the driver disconnect (its tasks keep running on the cluster)."""
        with contextlib.suppress(OSError, ValueError), self._send_lock:
            self.conn.send(("close",))
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.alive = False
        self.conn.close()


def _bare_handle(spec: base.LaunchSpec) -> base.Handle:
    return base.Handle(node=spec.node, task=spec.task, pid=0, start_time=0.0,
                       control_dir=spec.control_dir, launch_id=spec.launch_id)


def _host_port(address: str) -> tuple[str, int] | None:
    """host and port of "HOST:PORT" or "ray://HOST:PORT"; None for "auto" and the like."""
    raw = address.removeprefix("ray://").rstrip("/")
    host, sep, port = raw.rpartition(":")
    if not sep or not port.isdigit() or not host:
        return None
    return host.strip("[]"), int(port)


def _addr(probe: tuple[str, int] | None) -> str:
    return f"{probe[0]}:{probe[1]}" if probe else "the cluster"


def _answers(probe: tuple[str, int], timeout: float) -> bool:
    try:
        socket.create_connection(probe, timeout=timeout).close()
    except OSError:
        return False
    return True


def _check_reachable(address: str, probe: tuple[str, int] | None, timeout: float) -> None:
    """Fail at once when nothing listens at the address (Ray would retry for minutes)."""
    if probe is None:
        return
    try:
        socket.create_connection(probe, timeout=timeout).close()
    except OSError as exc:
        why = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        raise Unreachable(f"cannot reach the Ray cluster at {address}: {why.lower()}") \
            from None


def _rebuilt(err: tuple[str, str, str]) -> Exception:
    kind, name, message = err
    if kind == "corral":
        cls = getattr(errors, name, errors.CorralError)
        if isinstance(cls, type) and issubclass(cls, errors.CorralError):
            return cls(message)
    return RuntimeError(f"{name}: {message}")


# --- the child ---------------------------------------------------------------------------


def _portable(exc: BaseException) -> tuple[str, str, str]:
    if isinstance(exc, errors.CorralError):
        return "corral", type(exc).__name__, exc.message
    return "other", type(exc).__name__, str(exc)


def main(fd: int) -> int:
    """The child: connect to the cluster, then serve the server's calls until told to stop
    or the server goes."""
    conn = mpc.Connection(fd)
    _, address, namespace, run_as, shared_fs = conn.recv()
    logging.basicConfig(level=logging.WARNING,
                        format="%(asctime)s %(levelname)s corral-ray %(name)s: %(message)s")
    from corral.executors.ray import cluster

    try:
        ex = cluster.RayExecutor(address, namespace=namespace, run_as=run_as,
                                 shared_fs=shared_fs)
    except Exception as exc:
        conn.send(("failed", " ".join(str(exc).split()) or type(exc).__name__))
        return 1
    send_lock = threading.Lock()

    def send(msg: tuple[Any, ...]) -> None:
        with send_lock, contextlib.suppress(OSError, ValueError):
            conn.send(msg)

    def serve(key: int, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        try:
            if method not in METHODS:
                raise errors.CorralError(f"no such call: {method}")
            send(("reply", key, True, getattr(ex, method)(*args, **kwargs)))
        except Exception as exc:
            send(("reply", key, False, _portable(exc)))

    ex.set_waker(lambda: send(("wake",)))
    send(("ready", {"probe": ex.probe_address()}))
    pool = concurrent.futures.ThreadPoolExecutor(16, thread_name_prefix="corral-ray-call")
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            break
        if msg[0] == "close":
            break
        pool.submit(serve, *msg[1:])
    # Disconnecting from a cluster that is gone can hang: give it a while, then just go.
    closing = threading.Thread(target=ex.close, daemon=True)
    closing.start()
    closing.join(timeout=10)
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1])))
