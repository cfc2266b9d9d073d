"""A small synchronous client for corral's ModelArts-v2 REST API.

The CLI and scripts talk to a running server through this, never to the store: the server
is the only writer. Every non-2xx answer and every transport failure becomes one
`ClientError`, so callers have a single thing to catch and print.
"""

from __future__ import annotations

import datetime
import json
import socket
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from typing import Any

import httpx

from corral.domain import jobs, signing

#: what a refused connection usually means for someone running the CLI
_UNREACHABLE = "cannot reach corral at {url}: is `corral server` running?"
#: phase values after which a job changes no more
TERMINAL = frozenset(p.value for p in jobs.TERMINAL)


class ClientError(Exception):
    """The server answered with an error, or could not be reached (status 0)."""

    def __init__(self, status: int, error_code: str | None, error_msg: str) -> None:
        self.status = status
        self.error_code = error_code
        self.error_msg = error_msg
        super().__init__(str(self))

    def __str__(self) -> str:
        return f"{self.error_code}: {self.error_msg}" if self.error_code else self.error_msg


class SignatureAuth(httpx.Auth):
    """Signs every request with an access key pair, as the Huawei Cloud SDKs do."""

    requires_request_body = True

    def __init__(self, access_key: str, secret_key: str) -> None:
        self.access_key, self.secret_key = access_key, secret_key

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers.setdefault("Content-Type", "application/json")
        path, _, query = request.url.raw_path.decode("ascii").partition("?")
        to_sign = {"Host": request.headers["Host"],
                   "Content-Type": request.headers["Content-Type"]}
        request.headers.update(signing.sign(
            self.access_key, self.secret_key, method=request.method, path=path, query=query,
            headers=to_sign, body=request.content, now=datetime.datetime.now(datetime.UTC)))
        yield request


def credential_auth(token: str | None, access_key: str | None,
                    secret_key: str | None) -> httpx.Auth | None:
    """A token when there is one (cheaper to check), else a signature, else nothing."""
    if token:
        return _TokenAuth(token)
    if access_key and secret_key:
        return SignatureAuth(access_key, secret_key)
    return None


class _TokenAuth(httpx.Auth):
    def __init__(self, token: str) -> None:
        self.token = token

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["X-Auth-Token"] = self.token
        yield request


class Client:
    """One server, one project. The project is asked from the server when not given.

    Requests carry `token` (X-Auth-Token) when given, else are signed with the access key
    pair when given.
    """

    def __init__(
        self,
        base_url: str,
        project_id: str | None = None,
        timeout: float = 30,
        *,
        transport: httpx.BaseTransport | None = None,
        token: str | None = None,
        access_key: str | None = None,
        secret_key: str | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._project_id = project_id
        # `transport` lets tests answer requests in-process without a socket.
        if transport is None:
            # httpx writes a request in pieces; without TCP_NODELAY each one waits ~40 ms
            # for the server's delayed ACK.
            transport = httpx.HTTPTransport(
                socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)])
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout, transport=transport,
                                  auth=credential_auth(token, access_key, secret_key))

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def project_id(self) -> str:
        if self._project_id is None:
            self._project_id = str(self.info()["default_project_id"])
        return self._project_id

    # -- server ----------------------------------------------------------------------------

    def info(self) -> dict[str, Any]:
        """`{version, default_project_id, database, home, nodes}` of the server."""
        return self._request("GET", "/corral/info")

    def node_usage(self, minutes: int = 60) -> dict[str, Any]:
        """`{minutes, nodes}`: each node's own use over the last `minutes` (the Nodes page)."""
        return self._request("GET", "/corral/node-usage", params={"minutes": minutes})

    def flavors(self) -> dict[str, Any]:
        return self._request("GET", self._v2("/training-job-flavors"))

    def engines(self) -> dict[str, Any]:
        return self._request("GET", self._v2("/training-job-engines"))

    # -- jobs ------------------------------------------------------------------------------

    def create_job(self, body: dict[str, Any]) -> dict[str, Any]:
        return self._request("POST", self._v2("/training-jobs"), json=body)

    def get_job(self, job_id: str, *, watch: Sequence[str] = (),
                timeout: float = 30.0) -> dict[str, Any]:
        """The job; with `watch`, once its phase is none of those, or `timeout` seconds
        have passed."""
        if not watch:
            return self._request("GET", self._job(job_id))
        params = [*(("watch", phase) for phase in watch), ("timeout", timeout)]
        # The answer may take the whole wait: the request's own timeout starts after it.
        read = self._http.timeout.read
        return self._request("GET", self._job(job_id), params=params,
                             timeout=None if read is None else read + timeout)

    def list_jobs(
        self,
        *,
        phases: Iterable[str] = (),
        name: str | None = None,
        filters: Iterable[dict[str, Any]] = (),
        limit: int = 10,
        offset: int = 0,
        sort_by: str = "create_time",
        order: str = "desc",
    ) -> dict[str, Any]:
        """One page of the search: `offset` counts pages of `limit` jobs, as in ModelArts.

        `phases` and `name` are shorthands for the `in` and `like` filters; `filters` are
        passed through as they are.
        """
        all_filters = list(filters)
        if phases := list(phases):
            all_filters.append({"key": "phase", "operator": "in", "value": phases})
        if name:
            all_filters.append({"key": "name", "operator": "like", "value": [name]})
        body = {
            "offset": offset,
            "limit": limit,
            "sort_by": sort_by,
            "order": order,
            "filters": all_filters,
        }
        return self._request("POST", self._v2("/training-job-searches"), json=body)

    def update_description(self, job_id: str, text: str) -> None:
        self._request("PUT", self._job(job_id), json={"description": text})

    def terminate(self, job_id: str) -> dict[str, Any]:
        return self._request(
            "POST", self._job(job_id, "/actions"), json={"action_type": "terminate"}
        )

    def delete(self, job_id: str) -> None:
        self._request("DELETE", self._job(job_id))

    def events(
        self, job_id: str, limit: int = 50, offset: int = 0, order: str = "asc"
    ) -> dict[str, Any]:
        params = {"limit": limit, "offset": offset, "order": order}
        return self._request("GET", self._job(job_id, "/events"), params=params)

    # -- scheduling ------------------------------------------------------------------------

    def quotas(self) -> dict[str, Any]:
        """`{project_id, quotas: [{pool_id, limits, borrowing, weight, used}]}`."""
        return self._request("GET", self._v2("/training-quotas"))

    def set_quotas(self, quotas: list[dict[str, Any]]) -> dict[str, Any]:
        """Replace the project's quotas (admin only)."""
        return self._request("PUT", self._v2("/training-quotas"), json={"quotas": quotas})

    def pools(self) -> dict[str, Any]:
        return self._request("GET", self._v2("/training-pools"))

    def queue(self, pool_id: str | None = None) -> dict[str, Any]:
        params = {"pool_id": pool_id} if pool_id else {}
        return self._request("GET", self._v2("/training-queue"), params=params)

    def retention(self, *, apply: bool = False) -> dict[str, Any]:
        """What retention removes in the project now (`{logs, records}`, each ended job
        with why); with `apply`, remove it (a project admin)."""
        return self._request("POST" if apply else "GET", self._v2("/retention"))

    # -- logs and metrics ------------------------------------------------------------------

    def log_preview(self, job_id: str, task: str = "worker-0") -> dict[str, Any]:
        """`{content, current_size, full_size}`: the end of the task's log."""
        return self._request("GET", self._job(job_id, f"/tasks/{task}/logs/preview"))

    def log_chunk(
        self, job_id: str, task: str = "worker-0", offset: int = 0, attempt: int | None = None
    ) -> dict[str, Any]:
        """`{content, offset, next_offset, full_size, attempt}` from byte `offset` on.

        Without `attempt` the server answers for the latest run of the task.
        """
        params: dict[str, int] = {"offset": offset}
        if attempt is not None:
            params["attempt"] = attempt
        return self._request("GET", self._job(job_id, f"/tasks/{task}/logs"), params=params)

    def metrics(self, job_id: str, task: str = "worker-0") -> dict[str, Any]:
        """`{metrics: [{metric, value: [...]}]}`, oldest sample first."""
        return self._request("GET", self._job(job_id, f"/metrics/{task}"))

    # -- identity --------------------------------------------------------------------------

    def whoami(self) -> dict[str, Any]:
        """`{user, is_admin, credential, projects: [{project_id, name, role}]}`."""
        return self._request("GET", "/corral/whoami")

    def projects(self) -> dict[str, Any]:
        return self._request("GET", "/corral/projects")

    def create_project(self, name: str) -> dict[str, Any]:
        return self._request("POST", "/corral/projects", json={"name": name})

    def users(self) -> dict[str, Any]:
        return self._request("GET", "/corral/users")

    def create_user(self, name: str, projects: dict[str, str], is_admin: bool = False
                    ) -> dict[str, Any]:
        """The new user, with their first token (shown only in this answer)."""
        return self._request("POST", "/corral/users",
                             json={"name": name, "projects": projects, "is_admin": is_admin})

    def disable_user(self, name: str) -> None:
        self._request("DELETE", f"/corral/users/{name}")

    def set_member(self, project: str, user: str, role: str) -> dict[str, Any]:
        return self._request("PUT", f"/corral/projects/{project}/members/{user}",
                             json={"role": role})

    def remove_member(self, project: str, user: str) -> dict[str, Any]:
        return self._request("DELETE", f"/corral/projects/{project}/members/{user}")

    def create_key(self, description: str = "") -> dict[str, Any]:
        """`{access_key, secret_key, project_id, ...}`: the secret is shown only here."""
        return self._request("POST", f"/corral/projects/{self.project_id}/keys",
                             json={"description": description})

    def keys(self) -> dict[str, Any]:
        return self._request("GET", f"/corral/projects/{self.project_id}/keys")

    def revoke_key(self, access_key: str) -> None:
        self._request("DELETE", f"/corral/projects/{self.project_id}/keys/{access_key}")

    def create_token(self, description: str = "", ttl_s: int | None = None) -> dict[str, Any]:
        return self._request("POST", "/corral/tokens",
                             json={"description": description, "ttl_s": ttl_s})

    def tokens(self) -> dict[str, Any]:
        return self._request("GET", "/corral/tokens")

    def revoke_token(self, token_id: str) -> None:
        self._request("DELETE", f"/corral/tokens/{token_id}")

    # -- versions, training metrics and models --------------------------------------------

    def create_version(self, job_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """A new version of the job (see `domain.versions.VersionCreate` for `body`)."""
        return self._request("POST", self._job(job_id, "/versions"), json=body)

    def versions(self, job_id: str) -> dict[str, Any]:
        return self._request("GET", self._job(job_id, "/versions"))

    def version(self, job_id: str, version: str) -> dict[str, Any]:
        return self._request("GET", self._job(job_id, f"/versions/{version}"))

    def training_metrics(self, job_id: str, task: str | None = None) -> dict[str, Any]:
        params = {"task": task} if task else {}
        return self._request("GET", self._job(job_id, "/training-metrics"), params=params)

    def models(self) -> dict[str, Any]:
        return self._request("GET", self._v2("/models"))

    def model(self, name: str) -> dict[str, Any]:
        return self._request("GET", self._v2(f"/models/{name}"))

    def model_version(self, name: str, version: str) -> dict[str, Any]:
        return self._request("GET", self._v2(f"/models/{name}/versions/{version}"))

    def register_model(self, name: str, job_id: str, channel: str | None = None
                       ) -> dict[str, Any]:
        body = {"job_id": job_id, **({"channel": channel} if channel else {})}
        return self._request("POST", self._v2(f"/models/{name}/versions"), json=body)

    def set_alias(self, name: str, alias: str, version: int) -> dict[str, Any]:
        return self._request("PUT", self._v2(f"/models/{name}/aliases/{alias}"),
                             json={"version": version})

    def delete_alias(self, name: str, alias: str) -> dict[str, Any]:
        return self._request("DELETE", self._v2(f"/models/{name}/aliases/{alias}"))

    def delete_model(self, name: str, version: str | None = None) -> None:
        path = f"/models/{name}" + (f"/versions/{version}" if version else "")
        self._request("DELETE", self._v2(path))

    def download_model(self, name: str, version: str, dest: Any) -> int:
        """Write the version's archive (tar.gz) to the open binary file `dest`; bytes."""
        path = self._v2(f"/models/{name}/versions/{version}/archive")
        try:
            with self._http.stream("GET", path) as resp:
                if not resp.is_success:
                    resp.read()
                    raise _error(resp)
                size = 0
                for chunk in resp.iter_bytes():
                    dest.write(chunk)
                    size += len(chunk)
                return size
        except httpx.TransportError as exc:
            raise ClientError(0, None, f"talking to corral at {self.base_url}: {exc}") from None

    # -- pipelines -------------------------------------------------------------------------

    def create_pipeline(self, body: dict[str, Any]) -> dict[str, Any]:
        return self._request("POST", self._v2("/pipelines"), json=body)

    def pipelines(self, *, states: Iterable[str] = (), name: str | None = None,
                  limit: int = 20, offset: int = 0) -> dict[str, Any]:
        """`{total, count, items}`, newest first; `offset` counts pipelines."""
        params: list[tuple[str, Any]] = [("limit", limit), ("offset", offset),
                                         *(("state", s) for s in states)]
        if name is not None:
            params.append(("name", name))
        return self._request("GET", self._v2("/pipelines"), params=params)

    def pipeline(self, pipeline_id: str) -> dict[str, Any]:
        return self._request("GET", self._v2(f"/pipelines/{pipeline_id}"))

    def pipeline_action(self, pipeline_id: str, action: str, **options: Any) -> dict[str, Any]:
        """`stop`, or `rerun` with `mode`, `from_task`, `parameters`."""
        return self._request("POST", self._v2(f"/pipelines/{pipeline_id}/actions"),
                             json={"action": action, **options})

    def clean_pipeline(self, pipeline_id: str) -> dict[str, Any]:
        return self._request("POST", self._v2(f"/pipelines/{pipeline_id}/clean"))

    def delete_pipeline(self, pipeline_id: str) -> dict[str, Any]:
        return self._request("DELETE", self._v2(f"/pipelines/{pipeline_id}"))

    def pipeline_events(self, pipeline_id: str, limit: int = 100) -> dict[str, Any]:
        return self._request("GET", self._v2(f"/pipelines/{pipeline_id}/events"),
                             params={"limit": limit})

    # -- plumbing --------------------------------------------------------------------------

    def v2(self, method: str, path: str, **kwargs: Any) -> Any:
        """Any call under `/v2/{project_id}` (the SDK's other modules are built on it)."""
        return self._request(method, self._v2(path), **kwargs)

    def _v2(self, path: str) -> str:
        return f"/v2/{self.project_id}{path}"

    def _job(self, job_id: str, suffix: str = "") -> str:
        return self._v2(f"/training-jobs/{job_id}{suffix}")

    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            resp = self._http.request(method, path, **kwargs)
        except httpx.ConnectError:
            raise ClientError(0, None, _UNREACHABLE.format(url=self.base_url)) from None
        except httpx.TimeoutException:
            raise ClientError(
                0, None, f"corral at {self.base_url} did not answer in time"
            ) from None
        except httpx.TransportError as exc:
            raise ClientError(0, None, f"talking to corral at {self.base_url}: {exc}") from None
        if not resp.is_success:
            raise _error(resp)
        if not resp.content:
            return {}
        try:
            return resp.json()
        except json.JSONDecodeError:
            raise ClientError(
                resp.status_code, None, f"{method} {path}: the answer is not JSON"
            ) from None


def follow(
    api: Client,
    job_id: str,
    tail: LogTail,
    on_text: Callable[[str], None],
    on_job: Callable[[dict[str, Any]], None] | None = None,
    poll: float = 0.5,
) -> dict[str, Any]:
    """Feeds new log text until the job is in a terminal phase and its log is drained.

    `on_job` sees the job at every poll. Returns the job as it ended. Between polls the
    job is watched (`?watch=`): a change of phase is seen at once, not at the next poll.
    """
    job = api.get_job(job_id)
    while True:
        # The phase is read before the log: once terminal, one more read gets every last line.
        if on_job is not None:
            on_job(job)
        for text in tail.read():
            on_text(text)
        if job["status"]["phase"] in TERMINAL:
            return job
        if poll > 0:
            job = api.get_job(job_id, watch=[job["status"]["phase"]], timeout=poll)
        else:
            job = api.get_job(job_id)


class LogTail:
    """Reads a task's log on from where it stopped last time.

    Without a given attempt it follows the latest run: when a newer one appears (the task
    was restarted), the rest of the old run is read first, then the new one from its start.
    """

    def __init__(self, api: Client, job_id: str, task: str, attempt: int | None = None) -> None:
        self.api, self.job_id, self.task = api, job_id, task
        self.pinned = attempt is not None
        self.attempt = attempt
        self.offset = 0

    def read(self) -> Iterator[str]:
        """Everything written since the last call, in order."""
        while True:
            asked = self.attempt if self.pinned else None
            chunk = self.api.log_chunk(self.job_id, self.task, self.offset, asked)
            latest = chunk.get("attempt")
            # Attempts count from 1; 0 (or None) means no run has started yet.
            if not self.pinned and self.attempt and latest != self.attempt:
                yield from self._drain(self.attempt)
                self.attempt, self.offset = latest, 0
                continue
            self.attempt = latest
            if not self._advance(chunk):
                return
            yield chunk["content"]

    def _drain(self, attempt: int) -> Iterator[str]:
        while True:
            chunk = self.api.log_chunk(self.job_id, self.task, self.offset, attempt)
            if not self._advance(chunk):
                return
            yield chunk["content"]

    def _advance(self, chunk: dict[str, Any]) -> bool:
        """Moves past `chunk`; False when it held nothing new."""
        next_offset = int(chunk.get("next_offset", self.offset))
        if not chunk.get("content") or next_offset <= self.offset:
            return False
        self.offset = next_offset
        return True


def _error(resp: httpx.Response) -> ClientError:
    """The ModelArts error body when there is one, else the HTTP status and some text."""
    try:
        body = resp.json()
    except json.JSONDecodeError:
        body = None
    if isinstance(body, dict) and "error_msg" in body:
        return ClientError(resp.status_code, body.get("error_code"), str(body["error_msg"]))
    text = resp.text.strip()[:200] or resp.reason_phrase
    return ClientError(resp.status_code, None, f"HTTP {resp.status_code}: {text}")
