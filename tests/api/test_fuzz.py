"""A bounded schemathesis run against /openapi.json of a live server, on SQLite and on
PostgreSQL.

Every operation gets generated requests (valid and invalid ones, the values at and just
beyond each bound the schema states among them) with the admin's token, its path's project
and job pinned to real ones; no answer may be a 5xx or break the schema. Then every
operation is sent once more per number and per string it takes (path, query and body),
that one value replaced by an integer beyond 64 bits, a long string or one holding a NUL,
from a request the server accepted where one was found: none may reach the database
unchecked (a 5xx). No generated job can ever run: the one core is taken by a job the run
never names, so whatever the fuzzer submits only waits in the queue.
"""

from __future__ import annotations

import contextlib
import copy
import pathlib
import random
import secrets
import urllib.parse
from collections.abc import Iterator
from typing import Any

import httpx
import hypothesis
import hypothesis.errors
import pytest
import schemathesis
import sqlalchemy as sa
from hypothesis import HealthCheck, Phase, settings
from schemathesis.checks import not_a_server_error
from schemathesis.core import NotSet
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests import conftest, factories

pytestmark = pytest.mark.slow

#: integers no database column holds: 2^62 pages of 50 rows overflow 64 bits too
HUGE = (2**62, 2**63, -(2**63) - 1)
#: long strings: in a URL as long as proxies let through, in a body beyond every limit
LONG_IN_URL = 8_000
LONG_IN_BODY = 100_000
#: text no PostgreSQL column holds
NUL = "a\x00b"
#: generated requests tried per operation for one the server accepts
BASE_TRIES = 12


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def fuzzed(request: pytest.FixtureRequest,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    with _database(request) as overrides:
        home = tmp_path_factory.mktemp("fuzz") / "home"
        live = conftest.start_live(home, cpus=1, default_flavor="tiny",
                                   flavors=[{"flavor_id": "tiny", "cpu": 1, "memory_gb": 1}],
                                   **overrides)
        try:
            blocker = live.submit(factories.make_job(name="blocker", command="sleep 600",
                                                     flavor_id="tiny"))
            live.wait(blocker["metadata"]["id"], {"Running"})
            jobs = {name: live.submit(factories.make_job(name=name, command="true",
                                                         flavor_id="tiny"))["metadata"]["id"]
                    for name in ("target", "swept", "to-delete")}
            yield {"live": live, "job_id": jobs["target"], "jobs": jobs}
        finally:
            conftest.stop_live(live)


@contextlib.contextmanager
def _database(request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    """The server's database settings for the fixture's parameter: SQLite in its home, or
    a fresh PostgreSQL database, dropped afterwards."""
    if request.param == "sqlite":
        yield {}
        return
    admin: sa.Engine = request.getfixturevalue("pg_admin")
    name = f"corral_fuzz_{secrets.token_hex(6)}"
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    try:
        yield {"database_url": conftest.PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"}
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="module")
def raw_schema(fuzzed: dict[str, Any]) -> dict[str, Any]:
    live: conftest.Live = fuzzed["live"]
    return dict(live.http.get("/openapi.json").json())


@pytest.fixture(scope="module")
def api_schema(raw_schema: dict[str, Any]) -> Any:
    return schemathesis.openapi.from_dict(raw_schema)


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
@settings(max_examples=6, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
# Every operation of the API is one of its subtests: about 60 s in all on two idle cores,
# more than the default 120 s on a loaded machine, and more with each new operation.
@pytest.mark.timeout(360)
def test_no_operation_answers_5xx_or_breaks_its_schema(case: Any, fuzzed: dict[str, Any]
                                                       ) -> None:
    live: conftest.Live = fuzzed["live"]
    if case.query is None:
        case.query = {}
    _pin(case.path_parameters, case.query, fuzzed, fuzzed["job_id"], case.operation.path)
    case.call_and_validate(
        base_url=live.url, headers={"X-Auth-Token": live.login.token},
        checks=[not_a_server_error, response_schema_conformance, status_code_conformance,
                content_type_conformance])


def _pin(path: dict[str, Any] | None, query: dict[str, Any] | None,
         fuzzed: dict[str, Any], job_id: str, template: str = "") -> None:
    """The path's project and job are real ones, the admin is never the user a request
    names, and a watch or a stream ends at once."""
    live: conftest.Live = fuzzed["live"]
    params = path if path is not None else {}
    if "project_id" in params:
        params["project_id"] = live.project_id
    if "training_job_id" in params:
        params["training_job_id"] = job_id
    if "user_name" in params and params["user_name"] == live.login.user:
        params["user_name"] = "not-the-admin"
    if query and "watch" in query and _valid_wait(query.get("timeout", 30)):
        # A watch of a Pending job waits its whole timeout: keep it short.
        query["timeout"] = 0.1
    if query is not None and template.endswith(STREAMS) and _valid_stream(
            query.get("timeout", 1)):
        query["timeout"] = 0.1  # a stream lasts its whole timeout


#: the paths that answer with a stream (api/streams.py)
STREAMS = ("/logs/stream", "/training-job-changes")


def _valid_stream(timeout: Any) -> bool:
    try:
        return 0 < float(timeout) <= 3600
    except (TypeError, ValueError):
        return False


def _valid_wait(timeout: Any) -> bool:
    try:
        return 0 < float(timeout) <= 60
    except (TypeError, ValueError):
        return False


# --- the schema bounds what requests carry --------------------------------------------------


def test_every_number_a_request_takes_is_bounded_in_the_schema(raw_schema: dict[str, Any]
                                                                ) -> None:
    """An integer without bounds reaches the database, which cannot hold it: 500."""
    found = list(_request_scalars(raw_schema))
    numbers = [(where, s) for where, s in found if s.get("type") in ("integer", "number")]
    assert len(numbers) > 20, "the walk found too few numbers to be believed"
    unbounded = [where for where, s in numbers
                 if not ({"minimum", "exclusiveMinimum"} & set(s)
                         and {"maximum", "exclusiveMaximum"} & set(s))]
    assert unbounded == []


def test_the_schema_states_the_rules_validation_enforces(raw_schema: dict[str, Any]) -> None:
    """Name patterns, version names, pool ids and the pairing of an events' time range."""
    scalars = {where: s for where, s in _request_scalars(raw_schema)}
    create = ("POST /v2/{project_id}/training-jobs", "body")
    assert scalars[(*create, "metadata", "name")]["pattern"] == "^[A-Za-z0-9_-]{1,64}$"
    assert "pattern" in scalars[(*create, "spec", "resource", "pool_id")]
    assert "pattern" in scalars[(*create, "algorithm", "inputs", 0, "name")]
    assert "pattern" in scalars[("POST /corral/projects", "body", "name")]
    version = ("GET /v2/{project_id}/training-jobs/{training_job_id}/versions/{version}",
               "path", "version")
    assert scalars[version]["pattern"] == "^[Vv]?0*[1-9][0-9]{0,8}$"
    events = "GET /v2/{project_id}/training-jobs/{training_job_id}/events"
    for end in ("start_time", "end_time"):
        assert "give both or neither" in scalars[(events, "query", end)]["description"]


# --- every operation, each value huge or long ----------------------------------------------


def test_no_operation_answers_5xx_to_huge_integers_long_strings_or_nul(
        fuzzed: dict[str, Any], api_schema: Any, raw_schema: dict[str, Any]) -> None:
    live: conftest.Live = fuzzed["live"]
    failures: list[str] = []
    swept = 0
    for result in api_schema.get_all_operations():
        op = result.ok()
        base = _accepted_or_first(op, fuzzed)
        for what, variant in _variants(op.method.upper(), op.path, base, raw_schema):
            try:
                r = _send(live, variant)
            except httpx.TransportError as exc:  # the server dropped the connection
                failures.append(f"{op.method.upper()} {op.path} {what}: {exc!r}")
                continue
            if r.status_code >= 500 or (r.status_code >= 400 and set(r.json()) != {
                    "error_code", "error_msg"}):
                failures.append(f"{op.method.upper()} {op.path} {what}: {r.status_code} "
                                f"{r.text[:200]}")
        swept += 1
    assert failures == []
    assert swept == sum(len(ops) for ops in raw_schema["paths"].values())


def _job_for(method: str, fuzzed: dict[str, Any]) -> str:
    # A DELETE deletes: it gets a job of its own, so that every other call finds one.
    return fuzzed["jobs"]["to-delete" if method == "DELETE" else "swept"]


CREATE = "POST /v2/{project_id}/training-jobs"


def _job_body(scratch: pathlib.Path) -> dict[str, Any]:
    """A create body with every section filled, which the generator seldom makes (a
    command, channels that exist): the sweep varies its values one at a time."""
    (scratch / "data").mkdir(parents=True, exist_ok=True)
    body = factories.make_job(command="true", flavor_id="tiny", retries=1,
                              parameters={"lr": 0.1}, environments={"SEED": "1"},
                              inputs={"data": str(scratch / "data")},
                              outputs={"out": str(scratch / "out")})
    body["metadata"]["description"] = "swept"
    body["spec"]["schedule_policy"] = {"priority": 1, "preemptible": False,
                                       "placement": "pack"}
    body["spec"]["log_export_path"] = {"host_path": str(scratch / "logs")}
    return body


def _accepted_or_first(op: Any, fuzzed: dict[str, Any]) -> dict[str, Any]:
    """A request of `op` the server accepts (2xx): a full create body for a job, for any
    other operation the first generated one it accepts, else the first generated."""
    live: conftest.Live = fuzzed["live"]
    method = op.method.upper()
    if f"{method} {op.path}" == CREATE:
        request = {"method": method, "template": op.path, "query": {},
                   "path": {"project_id": live.project_id},
                   "body": _job_body(live.settings.home.parent / "swept")}
        r = _send(live, request)
        assert r.status_code == 201, r.text
        return request
    tried: list[dict[str, Any]] = []
    taken: list[dict[str, Any]] = []

    def accepted(case: Any) -> bool:
        request = {"method": method, "template": op.path,
                   "path": dict(case.path_parameters or {}), "query": dict(case.query or {}),
                   "body": None if isinstance(case.body, NotSet) else case.body}
        _pin(request["path"], request["query"], fuzzed, _job_for(method, fuzzed), op.path)
        if "task_id" in request["path"]:
            request["path"]["task_id"] = "worker-0"
        tried.append(request)
        if _send(live, request).status_code < 300:
            taken.append(request)
        return bool(taken)

    with contextlib.suppress(hypothesis.errors.NoSuchExample):
        hypothesis.find(op.as_strategy(), accepted, random=random.Random(0), settings=settings(
            max_examples=BASE_TRIES, database=None, phases=[Phase.generate],
            suppress_health_check=list(HealthCheck)))
    return (taken or tried)[0]


def _send(live: conftest.Live, request: dict[str, Any]) -> httpx.Response:
    path = request["template"]
    for name, value in request["path"].items():
        path = path.replace("{" + name + "}", urllib.parse.quote(str(value), safe=""))
    kwargs: dict[str, Any] = {"params": request["query"]}
    if request["body"] is not None:
        kwargs["json"] = request["body"]
    return live.http.request(request["method"], path, **kwargs)


def _variants(method: str, template: str, base: dict[str, Any], raw: dict[str, Any]
              ) -> Iterator[tuple[str, dict[str, Any]]]:
    """`base` with one value replaced, for every number and string the operation takes."""
    op = f"{method} {template}"
    seen: set[tuple[Any, ...]] = set()
    made = 0
    for where, leaf in _request_scalars(raw, only=op):
        kind = leaf.get("type")
        if (where, kind) in seen:  # a union names a place twice
            continue
        seen.add((where, kind))
        part, *rest = where[1:]
        if kind == "string":
            values: tuple[Any, ...] = (
                "x" * (LONG_IN_BODY if part == "body" else LONG_IN_URL), NUL)
        else:
            values = HUGE
        for value in values:
            variant = copy.deepcopy(base)
            made += 1
            if op == CREATE and rest != ["metadata", "name"]:  # a name is taken once
                variant["body"]["metadata"]["name"] = f"swept-{made}"
            if part == "body":
                variant["body"] = _put(variant["body"], rest, value)
            else:
                variant[part][rest[0]] = value
            yield f"{'.'.join(map(str, where[1:]))}={str(value)[:24]}", variant


def _put(doc: Any, path: list[Any], value: Any) -> Any:
    """`doc` with `value` at `path` (keys, and 0 for an array's item), made as needed."""
    if not path:
        return value
    key, rest = path[0], path[1:]
    if isinstance(key, int):
        items = doc if isinstance(doc, list) and doc else [None]
        return [_put(items[0], rest, value), *items[1:]]
    out = dict(doc) if isinstance(doc, dict) else {}
    out[key] = _put(out.get(key), rest, value)
    return out


def _request_scalars(raw: dict[str, Any], only: str | None = None
                     ) -> Iterator[tuple[tuple[Any, ...], dict[str, Any]]]:
    """((operation, "path" | "query" | "body", names...), schema) of every number and
    string a request may carry, $refs followed and unions opened."""
    for template, ops in raw["paths"].items():
        for method, spec in ops.items():
            op = f"{method.upper()} {template}"
            if only is not None and op != only:
                continue
            for param in spec.get("parameters", []):
                if param["in"] in ("path", "query"):
                    yield from _scalars(raw, param["schema"], (op, param["in"], param["name"]),
                                        param.get("description"))
            body = spec.get("requestBody", {}).get("content", {}).get("application/json")
            if body:
                yield from _scalars(raw, body["schema"], (op, "body"))


def _scalars(raw: dict[str, Any], schema: dict[str, Any], where: tuple[Any, ...],
             description: str | None = None, depth: int = 0
             ) -> Iterator[tuple[tuple[Any, ...], dict[str, Any]]]:
    if depth > 12:
        return
    while "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[1]
        schema = {**raw["components"]["schemas"][name],
                  **{k: v for k, v in schema.items() if k != "$ref"}}
    for key in ("anyOf", "oneOf", "allOf"):
        for sub in schema.get(key, []):
            yield from _scalars(raw, sub, where, description or schema.get("description"),
                                depth + 1)
    kind = schema.get("type")
    if kind in ("integer", "number", "string"):
        described = schema.get("description") or description
        yield where, {**schema, **({"description": described} if described else {})}
    elif kind == "object":
        for name, sub in schema.get("properties", {}).items():
            yield from _scalars(raw, sub, (*where, name), depth=depth + 1)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            yield from _scalars(raw, extra, (*where, "k"), depth=depth + 1)
    elif kind == "array" and isinstance(schema.get("items"), dict):
        yield from _scalars(raw, schema["items"], (*where, 0), depth=depth + 1)


# --- at the bounds -------------------------------------------------------------------------


def test_the_largest_offsets_and_times_the_schema_allows_answer_empty_pages(
        fuzzed: dict[str, Any], raw_schema: dict[str, Any]) -> None:
    live: conftest.Live = fuzzed["live"]
    scalars = {where: s for where, s in _request_scalars(raw_schema)}
    search = ("POST /v2/{project_id}/training-job-searches", "body")
    events = "GET /v2/{project_id}/training-jobs/{training_job_id}/events"
    log = "GET /v2/{project_id}/training-jobs/{training_job_id}/tasks/{task_id}/logs"
    job = f"/training-jobs/{fuzzed['jobs']['swept']}"

    found = live.http.post(live.path("/training-job-searches"), json={
        "offset": scalars[(*search, "offset")]["maximum"],
        "limit": scalars[(*search, "limit")]["maximum"]})
    assert found.status_code == 200, found.text
    assert found.json()["items"] == [] and found.json()["total"] >= 4
    page = live.http.get(live.path(job + "/events"), params={
        name: int(scalars[(events, "query", name)]["maximum"])
        for name in ("offset", "limit", "start_time", "end_time")} | {"start_time": 0})
    assert page.status_code == 200, page.text
    assert page.json()["events"] == [] and page.json()["total"] >= 1
    chunk = live.http.get(live.path(job + "/tasks/worker-0/logs"), params={
        "offset": int(scalars[(log, "query", "offset")]["maximum"])})
    assert chunk.status_code == 200, chunk.text
    assert chunk.json()["content"] == ""


def test_the_fuzzed_server_kept_its_blocker_running(fuzzed: dict[str, Any]) -> None:
    """The runs above could not have run a generated job: the only core stayed taken."""
    live: conftest.Live = fuzzed["live"]
    found = live.http.post(live.path("/training-job-searches"), json={
        "limit": 50, "filters": [{"key": "phase", "operator": "in", "value": ["Running"]}]})
    assert [j["metadata"]["name"] for j in found.json()["items"]] == ["blocker"]
