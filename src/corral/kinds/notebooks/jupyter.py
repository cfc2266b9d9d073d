"""What the controller asks a session's JupyterLab, through its own REST API on its socket:
whether it answers, what its kernels and terminals last did, and to shut down.

Every call has a short timeout: the controller's pass waits on them, and a JupyterLab that
hangs must not hold the other notebooks (nor the other kinds) back.
"""

from __future__ import annotations

import dataclasses
import datetime

import httpx

#: seconds a call may take
TIMEOUT = 3.0


@dataclasses.dataclass(frozen=True)
class Where:
    """A session's JupyterLab: on this machine, the unix socket it listens on; on a Ray
    node, its address and port and the token it asks for. And its base URL."""

    base_url: str  #: /notebooks/<id>/
    sock: str = ""
    host: str = ""
    port: int = 0
    token: str = ""

    @property
    def authority(self) -> str:
        return "localhost" if self.sock else f"{self.host}:{self.port}"

    def url(self, path: str) -> str:
        return f"http://{self.authority}{self.base_url}{path}"

    def headers(self) -> dict[str, str]:
        """What every request to it carries: its token, over TCP."""
        return {"Authorization": f"token {self.token}"} if self.token else {}

    def client(self) -> httpx.Client:
        transport = httpx.HTTPTransport(uds=self.sock) if self.sock else None
        return httpx.Client(transport=transport, timeout=TIMEOUT, headers=self.headers())


@dataclasses.dataclass(frozen=True)
class Activity:
    busy: bool  #: a kernel is executing (however quiet it is)
    last: int | None  #: ms: the latest activity of a kernel or a terminal


def answers(where: Where) -> bool:
    try:
        with where.client() as http:
            return http.get(where.url("api/status")).status_code == 200
    except httpx.HTTPError:
        return False


def activity(where: Where) -> Activity | None:
    """What its kernels and terminals last did; None when it does not answer."""
    try:
        with where.client() as http:
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
        with where.client() as http:
            return http.post(where.url("api/shutdown")).status_code < 300
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
