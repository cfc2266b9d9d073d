"""Shared fixtures: settings in a temporary CORRAL_HOME, databases, and a live server."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pathlib
import secrets
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import psutil
import pytest
import sqlalchemy as sa

from corral import server
from corral import settings as settings_mod
from corral.sdk import credentials
from corral.store import db

PG_ADMIN_URL = os.environ.get("CORRAL_TEST_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
TERMINAL = {"Completed", "Failed", "Terminated", "Abnormal"}


def make_settings(home: Any, **overrides: Any) -> settings_mod.Settings:
    """Settings for tests: fast ticks and samples, a short grace period, no disk reserve
    (tests/unit/test_disk_reserve.py tests it; each test's home need not hold one)."""
    values: dict[str, Any] = {"home": home, "grace_period": 1.0, "tick_interval": 0.2,
                              "metrics_interval": 0.2, "disk_reserve_mb": 0}
    values.update(overrides)
    return settings_mod.Settings(**values)


@pytest.fixture(scope="session")
def pg_admin() -> Iterator[sa.Engine]:
    engine = sa.create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("SELECT 1")
    except sa.exc.OperationalError as exc:
        engine.dispose()
        if os.environ.get("CI") == "true":
            pytest.fail(f"PostgreSQL is unreachable at {PG_ADMIN_URL} and CI=true: {exc}")
        pytest.skip(f"PostgreSQL is unreachable at {PG_ADMIN_URL}")
    yield engine
    engine.dispose()


@pytest.fixture
def pg_url(pg_admin: sa.Engine) -> Iterator[str]:
    """A fresh, empty PostgreSQL database for one test, dropped afterwards."""
    name = f"corral_test_{secrets.token_hex(6)}"
    with pg_admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    yield PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    with pg_admin.connect() as conn:
        conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Any) -> str:
    """Each test using this runs once on SQLite and once on PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'state.db'}"
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def store(db_url: str) -> Iterator[db.Store]:
    s = db.Store(db_url)
    s.migrate()
    yield s
    s.dispose()


def http_client(url: str, token: str | None = None) -> httpx.Client:
    # TCP_NODELAY: httpx writes a request in pieces, and Nagle's algorithm would hold each
    # request back ~40 ms waiting for a delayed ACK.
    transport = httpx.HTTPTransport(
        socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)])
    headers = {"X-Auth-Token": token} if token else {}
    return httpx.Client(base_url=url, timeout=30, transport=transport, headers=headers)


@dataclasses.dataclass
class Identity:
    """A user made for a test: their token, a client that sends it, their key pair."""

    name: str
    project_id: str
    token: str
    http: httpx.Client
    access_key: str = ""
    secret_key: str = ""


@dataclasses.dataclass
class Live:
    """A running embedded server and an HTTP client bound to its default project.

    `http` carries the platform admin's token that the server wrote on its first start
    (`login` is that credential); `new_project`, `new_user` and `new_key` make more.
    """

    url: str
    project_id: str
    http: httpx.Client
    embedded: server.Embedded
    settings: settings_mod.Settings
    login: credentials.Login
    others: list[httpx.Client] = dataclasses.field(default_factory=list)

    def path(self, rest: str, project_id: str | None = None) -> str:
        return f"/v2/{project_id or self.project_id}{rest}"

    def new_project(self, name: str) -> str:
        r = self.http.post("/corral/projects", json={"name": name})
        assert r.status_code == 201, r.text
        return str(r.json()["project_id"])

    def new_user(self, name: str, role: str = "member", project_id: str | None = None,
                 *, key: bool = True) -> Identity:
        """A user with `role` in the project (default: the default one), and a key pair."""
        pid = project_id or self.project_id
        r = self.http.post("/corral/users", json={"name": name, "projects": {pid: role}})
        assert r.status_code == 201, r.text
        token = r.json()["token"]
        who = Identity(name=name, project_id=pid, token=token,
                       http=http_client(self.url, token))
        self.others.append(who.http)
        if key:
            k = self.new_key(who.http, pid)
            who.access_key, who.secret_key = k["access_key"], k["secret_key"]
        return who

    def new_key(self, http: httpx.Client | None = None,
                project_id: str | None = None) -> dict[str, Any]:
        """A new access key pair (as `http`'s user, default the admin)."""
        r = (http or self.http).post(f"/corral/projects/{project_id or self.project_id}/keys",
                                     json={"description": "test"})
        assert r.status_code == 201, r.text
        return dict(r.json())

    def submit(self, body: dict[str, Any]) -> dict[str, Any]:
        r = self.http.post(self.path("/training-jobs"), json=body)
        assert r.status_code == 201, r.text
        return dict(r.json())

    def job(self, job_id: str) -> dict[str, Any]:
        r = self.http.get(self.path(f"/training-jobs/{job_id}"))
        assert r.status_code == 200, r.text
        return dict(r.json())

    def wait(self, job_id: str, phases: set[str] | None = None,
             timeout: float = 30.0) -> dict[str, Any]:
        """Poll until the job reaches one of `phases` (default: any terminal phase)."""
        want = phases or TERMINAL
        deadline = time.monotonic() + timeout
        while True:
            job = self.job(job_id)
            if job["status"]["phase"] in want:
                return job
            if time.monotonic() > deadline:
                raise AssertionError(f"job {job_id} still {job['status']} after {timeout}s")
            time.sleep(0.05)


def start_live(home: Any, **overrides: Any) -> Live:
    s = make_settings(home, **overrides)
    emb = server.start_embedded(s)
    login = credentials.read(s.credentials_file)
    assert login is not None and login.token, "the first start wrote no credential"
    http = http_client(emb.url, login.token)
    return Live(url=emb.url, project_id=login.project_id, http=http, embedded=emb, settings=s,
                login=login)


def kill_leftovers(store: db.Store) -> None:
    """SIGKILL the process group of every task still recorded as live (test hygiene)."""
    from corral.executors import base
    from corral.store import job_repo

    with store.read() as conn:
        rows = job_repo.live_tasks(conn)
    for row in rows:
        if row.handle:
            h = base.Handle.loads(row.handle)
            if h.pid <= 0:  # not a local process (a Ray actor's task): killpg(0) is ours
                continue
            with contextlib.suppress(OSError):
                os.killpg(h.pid, 9)


def kill_under(home: pathlib.Path) -> None:
    """SIGKILL every process that runs in or from `home`'s run folders: a task launched
    while its server stopped, which no row records as live yet (test hygiene)."""
    runs = str(pathlib.Path(home).resolve() / "runs")
    for proc in psutil.process_iter(["cmdline", "cwd"]):
        cwd, argv = proc.info["cwd"] or "", proc.info["cmdline"] or ()
        if cwd.startswith(runs) or any(runs in arg for arg in argv):
            with contextlib.suppress(psutil.Error):
                proc.kill()


def stop_live(live: Live) -> None:
    live.http.close()
    for other in live.others:
        other.close()
    kill_leftovers(live.embedded.platform.store)
    live.embedded.stop()
    kill_under(live.settings.home)


@pytest.fixture
def live_server(tmp_path: Any) -> Iterator[Live]:
    live = start_live(tmp_path / "home")
    yield live
    stop_live(live)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist (`-n 2 --dist loadgroup`, pyproject.toml), a test file runs on one
    worker, so its module-scoped servers and browsers start once; and the files that start
    a Ray cluster share one worker, so two clusters never start at once (on two cores a
    second one's nodes time out starting). Runs before xdist's own hook reads the groups."""
    for item in items:
        group = "ray" if item.get_closest_marker("ray") else item.nodeid.split("::")[0]
        item.add_marker(pytest.mark.xdist_group(group))


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test marked `torch` needs PyTorch (the test extra installs it): without it, it
    fails under CI=true, as PostgreSQL's tests do, and is skipped, saying why, elsewhere."""
    if item.get_closest_marker("torch") is None:
        return
    import importlib.util

    if importlib.util.find_spec("torch") is not None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail("PyTorch is not installed and CI=true: pip install -e '.[test]'",
                    pytrace=False)
    pytest.skip("PyTorch is not installed: pip install -e '.[test]'")
