"""What the controller asks a session's JupyterLab, through its own REST API and token:
whether it answers, what its kernels and terminals last did, and to shut down.

Every call has a short timeout: the controller's pass waits on them, and a JupyterLab that
hangs must not hold the other notebooks (nor the other kinds) back.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
import os
import pathlib

import httpx

from corral.storage import nofollow

#: seconds a call may take
TIMEOUT = 3.0


@dataclasses.dataclass(frozen=True)
class Where:
    """A session's JupyterLab: where it listens and its token."""

    port: int
    token: str
    base_url: str  #: /notebooks/<id>/
    host: str = "127.0.0.1"

    def url(self, path: str) -> str:
        return f"http://{self.host}:{self.port}{self.base_url}{path}"

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"token {self.token}"}


@dataclasses.dataclass(frozen=True)
class Activity:
    busy: bool  #: a kernel is executing (however quiet it is)
    last: int | None  #: ms: the latest activity of a kernel or a terminal


def listening_port(session_dir: pathlib.Path, base_url: str) -> int | None:
    """The port the session's JupyterLab wrote in its runtime folder (the newest server
    file that serves `base_url`), or None while it has written none."""
    try:
        names = [n for n in os.listdir(session_dir)
                 if n.startswith("jpserver-") and n.endswith(".json")]
    except OSError:
        return None
    found: list[tuple[float, int]] = []
    for name in names:
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            fd = nofollow.open_file(session_dir / name)  # the job's folder: no links
            with os.fdopen(fd, "rb") as fh:
                info = json.loads(fh.read(65536))
                when = os.fstat(fh.fileno()).st_mtime
            if info.get("base_url") == base_url:
                found.append((when, int(info["port"])))
    return max(found)[1] if found else None


def answers(where: Where) -> bool:
    try:
        return httpx.get(where.url("api/status"), headers=where.headers,
                         timeout=TIMEOUT).status_code == 200
    except httpx.HTTPError:
        return False


def activity(where: Where) -> Activity | None:
    """What its kernels and terminals last did; None when it does not answer."""
    try:
        with httpx.Client(headers=where.headers, timeout=TIMEOUT) as http:
            kernels = http.get(where.url("api/kernels")).raise_for_status().json()
            terminals = http.get(where.url("api/terminals")).raise_for_status().json()
    except (httpx.HTTPError, ValueError):
        return None
    busy = any(k.get("execution_state") == "busy" for k in kernels)
    moments = [_ms(item.get("last_activity")) for item in [*kernels, *terminals]]
    known = [m for m in moments if m is not None]
    return Activity(busy=busy, last=max(known) if known else None)


def shut_down(where: Where) -> bool:
    """Ask JupyterLab to shut its kernels and terminals down and exit; whether it took it."""
    try:
        return httpx.post(where.url("api/shutdown"), headers=where.headers,
                          timeout=TIMEOUT).status_code < 300
    except httpx.HTTPError:
        return False


def _ms(stamp: object) -> int | None:
    if not isinstance(stamp, str):
        return None
    try:
        when = datetime.datetime.fromisoformat(stamp)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    return int(when.timestamp() * 1000)
