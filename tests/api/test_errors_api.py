"""Refused requests over real HTTP: the ModelArts error body, the documented code, and no trace.

Every case runs against one server that holds a finished job ("base"); each test takes a
snapshot of everything a client can see (the jobs, their events, the run directories)
before its request and checks it is the same afterwards.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import re
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from tests import conftest, factories

OTHER_PROJECT = "0" * 32
BASE_NAME = "base"
ERROR_KEYS = {"error_code", "error_msg"}


@dataclasses.dataclass(frozen=True)
class World:
    """The shared server, its one finished job, and a scratch directory for code."""

    live: conftest.Live
    job_id: str
    scratch: pathlib.Path


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("errors")
    live = conftest.start_live(root / "home")
    try:
        job = live.submit(factories.make_job(name=BASE_NAME, command="echo base"))
        assert live.wait(job["metadata"]["id"])["status"]["phase"] == "Completed"
        yield World(live=live, job_id=job["metadata"]["id"], scratch=root)
    finally:
        conftest.stop_live(live)


def assert_error(r: httpx.Response, status: int, code: str | None) -> dict[str, Any]:
    """The body is exactly the ModelArts error body, with `code` when one is given."""
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/json")
    body = r.json()
    assert set(body) == ERROR_KEYS, body
    assert isinstance(body["error_msg"], str) and body["error_msg"].strip(), body
    if code is None:
        assert re.fullmatch(r"[A-Za-z]+\.\d{4}", body["error_code"]), body
    else:
        assert body["error_code"] == code, body
    return dict(body)


def snapshot(live: conftest.Live) -> dict[str, Any]:
    """All a client can see of the project: jobs, their events, and the run directories."""
    r = live.http.post(
        live.path("/training-job-searches"), json={"limit": 50, "sort_by": "name", "order": "asc"}
    )
    assert r.status_code == 200, r.text
    found = r.json()
    jobs = [
        (
            j["metadata"]["id"],
            j["metadata"]["name"],
            j["metadata"]["description"],
            j["status"]["phase"],
        )
        for j in found["items"]
    ]
    events = {}
    for job_id, *_ in jobs:
        ev = live.http.get(live.path(f"/training-jobs/{job_id}/events"), params={"limit": 100})
        assert ev.status_code == 200, ev.text
        events[job_id] = ev.json()["events"]
    runs = live.settings.runs_dir
    return {
        "total": found["total"],
        "jobs": jobs,
        "events": events,
        "runs": sorted(p.name for p in runs.iterdir()) if runs.exists() else [],
    }


# --- the cases ---------------------------------------------------------------------------

Build = Callable[[World], dict[str, Any]]


@dataclasses.dataclass(frozen=True)
class Case:
    id: str
    build: Build  #: httpx keyword arguments (json=, content=, params=, headers=)
    code: str | None = "ModelArts.2788"  #: None: any "Prefix.NNNN" (the gateway's answers)
    says: str = ""  #: a word the message must hold, so the user knows what to fix
    method: str = "POST"
    path: str = "/v2/{pid}/training-jobs"  #: "{pid}": the default project, "{job}": base
    status: int = 400


def body_of(build: Callable[[World], Any]) -> Build:
    return lambda w: {"json": build(w)}


def cmd_job(**kw: Any) -> Build:
    return body_of(lambda _w: factories.make_job(command="true", **kw))


def code_job(boot_file: str = "train.py", **kw: Any) -> Build:
    return body_of(
        lambda w: factories.make_job(
            code_dir=factories.write_code(w.scratch, "print(1)"), boot_file=boot_file, **kw
        )
    )


def job_with(section: str, **fields: Any) -> Build:
    """A command job whose `section` ("metadata", "algorithm") is replaced by `fields`."""

    def build(_w: World) -> dict[str, Any]:
        body = factories.make_job(command="true")
        body[section] = {**body[section], **fields} if section == "algorithm" else fields
        return body

    return body_of(build)


def without(key: str) -> Build:
    def build(_w: World) -> dict[str, Any]:
        body = factories.make_job(command="true")
        del body[key]
        return body

    return body_of(build)


def a_file(w: World) -> str:
    path = w.scratch / f"file-{uuid.uuid4().hex[:8]}"
    path.write_text("not a directory")
    return str(path)


def scratch_job(**channels: Callable[[World], dict[str, str]]) -> Build:
    """A command job whose channels are computed from the scratch directory."""
    return body_of(
        lambda w: factories.make_job(command="true", **{k: f(w) for k, f in channels.items()})
    )


def raw(content: str, content_type: str | None) -> Build:
    headers = {"content-type": content_type} if content_type else {}
    return lambda _w: {"content": content.encode(), "headers": headers}


def json_body(body: Any) -> Build:
    return lambda _w: {"json": body}


def params(**p: Any) -> Build:
    return lambda _w: {"params": p}


def flt(key: str, operator: str, value: Any) -> Build:
    return json_body({"filters": [{"key": key, "operator": operator, "value": value}]})


def nothing(_w: World) -> dict[str, Any]:
    return {}


UNKNOWN = str(uuid.uuid4())
JOB = "/v2/{pid}/training-jobs/{job}"
ELSEWHERE = JOB.replace("{pid}", OTHER_PROJECT)
NO_JOB = f"/v2/{{pid}}/training-jobs/{UNKNOWN}"
SEARCH = "/v2/{pid}/training-job-searches"
TERMINATE = json_body({"action_type": "terminate"})
NOT_FOUND = {"code": "ModelArts.2775", "status": 404}
NO_PROJECT = {"code": "ModelArts.2786", "status": 404}
ON_SEARCH = {"path": SEARCH}
ON_EVENTS = {"path": JOB + "/events", "method": "GET"}
ON_LOG = {"path": JOB + "/tasks/worker-0/logs", "method": "GET"}
GATEWAY = {"code": None, "method": "GET", "status": 404}

CREATE_CASES = [
    Case("duplicate-name", cmd_job(name=BASE_NAME), "ModelArts.2751", BASE_NAME),
    Case("unknown-flavor", cmd_job(flavor_id="corral.nope"), "ModelArts.2763", "corral.nope"),
    Case("never-fits", cmd_job(flavor_id="corral.cpu.full", node_count=2), "ModelArts.2763"),
    Case("never-fits-gang", cmd_job(node_count=1024), "ModelArts.2763"),
    Case("name-with-space", cmd_job(name="has space"), says="name"),
    Case("name-with-slash", cmd_job(name="a/b"), says="name"),
    Case("name-empty", job_with("metadata", name=""), says="name"),
    Case("name-too-long", cmd_job(name="x" * 65), says="name"),
    Case("description-too-long", job_with("metadata", name="d", description="d" * 257)),
    Case("missing-metadata", without("metadata"), says="metadata"),
    Case("missing-algorithm", without("algorithm"), says="algorithm"),
    Case(
        "empty-algorithm",
        body_of(lambda _w: {**factories.make_job(command="true"), "algorithm": {}}),
        says="algorithm",
    ),
    Case("code-dir-without-boot-file", job_with("algorithm", code_dir="/tmp"), says="boot_file"),
    Case(
        "code-dir-missing",
        body_of(lambda w: factories.make_job(code_dir=w.scratch / "none")),
        says="code_dir",
    ),
    Case(
        "code-dir-is-a-file",
        body_of(lambda w: factories.make_job(code_dir=a_file(w))),
        says="code_dir",
    ),
    Case("boot-file-missing", code_job(boot_file="nope.py"), says="nope.py"),
    Case("boot-file-outside-code-dir", code_job(boot_file="../train.py"), says="boot_file"),
    Case("boot-file-absolute-elsewhere", code_job(boot_file="/etc/hostname"), says="boot_file"),
    Case(
        "code-dir-relative",
        body_of(lambda _w: factories.make_job(code_dir="code")),
        says="absolute",
    ),
    Case(
        "code-dir-s3",
        body_of(lambda _w: factories.make_job(code_dir="s3://bucket/code/")),
        says="s3://bucket/code/",
    ),
    Case("input-s3", cmd_job(inputs={"data": "s3://bucket/data/"}), says="data"),
    Case("output-obs", cmd_job(outputs={"out": "obs://bucket/out/"}), says="out"),
    Case("input-relative", cmd_job(inputs={"data": "data/"}), says="absolute"),
    Case("output-relative", cmd_job(outputs={"out": "out/"}), says="absolute"),
    Case(
        "input-missing",
        scratch_job(inputs=lambda w: {"data": str(w.scratch / "none")}),
        says="data",
    ),
    Case("output-is-a-file", scratch_job(outputs=lambda w: {"out": a_file(w)}), says="out"),
    Case(
        "duplicate-channel",
        scratch_job(
            inputs=lambda w: {"ch": str(w.scratch)}, outputs=lambda w: {"ch": str(w.scratch / "o")}
        ),
        says="ch",
    ),
    Case("retry-not-a-number", cmd_job(retries="three"), says="job-retry-num"),
    Case("retry-negative", cmd_job(retries=-1), says="job-retry-num"),
    Case("retry-too-many", cmd_job(retries=101), says="job-retry-num"),
    Case("node-count-zero", cmd_job(node_count=0), says="node_count"),
    Case(
        "unknown-engine", job_with("algorithm", engine={"engine_id": "cobol-85"}), says="cobol-85"
    ),
    Case(
        "engine-image",
        job_with("algorithm", engine={"image_url": "swr.example.com/i:1"}),
        says="image_url",
    ),
    Case("algorithm-id", job_with("algorithm", id=UNKNOWN)),
    Case("bad-env-name", cmd_job(environments={"1BAD": "x"}), says="1BAD"),
    Case("parameter-name-with-space", cmd_job(parameters={"a b": 1})),
    Case(
        "kind-not-job",
        body_of(lambda _w: {**factories.make_job(command="true"), "kind": "notebook"}),
        says="kind",
    ),
    Case("json-array", json_body([1, 2])),
    Case("json-string", json_body("x"), says="JSON object"),
    Case("json-number", json_body(7), says="JSON object"),
    Case("dataset-version-json-string", json_body("x"), says="JSON object",
         path="/v2/{pid}/datasets/nope/versions"),
    Case("invalid-json", raw('{"kind": "job", ', "application/json"), "ModelArts.2787"),
    Case("invalid-json-no-content-type", raw("{nope", None), "ModelArts.2787"),
    Case("invalid-json-text-plain", raw("{nope", "text/plain"), "ModelArts.2787"),
    Case("empty-body", raw("", "application/json"), None),
    Case(
        "unknown-project",
        cmd_job(),
        **NO_PROJECT,
        says=OTHER_PROJECT,
        path=f"/v2/{OTHER_PROJECT}/training-jobs",
    ),
]

NOT_FOUND_CASES = [
    Case("show-unknown-id", nothing, **NOT_FOUND, method="GET", path=NO_JOB, says=UNKNOWN),
    Case(
        "show-not-a-uuid",
        nothing,
        **NOT_FOUND,
        method="GET",
        path="/v2/{pid}/training-jobs/not-a-job",
    ),
    Case("show-under-another-project", nothing, **NOT_FOUND, method="GET", path=ELSEWHERE),
    Case("update-unknown", json_body({"description": "x"}), **NOT_FOUND, method="PUT", path=NO_JOB),
    Case(
        "update-under-another-project",
        json_body({"description": "x"}),
        **NOT_FOUND,
        method="PUT",
        path=ELSEWHERE,
    ),
    Case("delete-unknown", nothing, **NOT_FOUND, method="DELETE", path=NO_JOB),
    Case("delete-under-another-project", nothing, **NOT_FOUND, method="DELETE", path=ELSEWHERE),
    Case("terminate-unknown", TERMINATE, **NOT_FOUND, path=NO_JOB + "/actions"),
    Case("terminate-under-another-project", TERMINATE, **NOT_FOUND, path=ELSEWHERE + "/actions"),
    Case("events-unknown", nothing, **NOT_FOUND, method="GET", path=NO_JOB + "/events"),
    Case(
        "preview-unknown-job",
        nothing,
        **NOT_FOUND,
        method="GET",
        path=NO_JOB + "/tasks/worker-0/logs/preview",
    ),
    Case(
        "preview-unknown-task",
        nothing,
        **NOT_FOUND,
        method="GET",
        says="worker-9",
        path=JOB + "/tasks/worker-9/logs/preview",
    ),
    Case(
        "log-unknown-task",
        nothing,
        **NOT_FOUND,
        method="GET",
        says="chief",
        path=JOB + "/tasks/chief/logs",
    ),
    Case(
        "log-unknown-attempt",
        params(attempt=9),
        **NOT_FOUND,
        method="GET",
        path=JOB + "/tasks/worker-0/logs",
    ),
    Case(
        "metrics-unknown-task",
        nothing,
        **NOT_FOUND,
        method="GET",
        says="worker-1",
        path=JOB + "/metrics/worker-1",
    ),
    Case(
        "metrics-under-another-project",
        nothing,
        **NOT_FOUND,
        method="GET",
        path=ELSEWHERE + "/metrics/worker-0",
    ),
    Case(
        "search-unknown-project",
        json_body({}),
        **NO_PROJECT,
        path=f"/v2/{OTHER_PROJECT}/training-job-searches",
    ),
    Case(
        "flavors-unknown-project",
        nothing,
        **NO_PROJECT,
        method="GET",
        path=f"/v2/{OTHER_PROJECT}/training-job-flavors",
    ),
    Case(
        "engines-unknown-project",
        nothing,
        **NO_PROJECT,
        method="GET",
        path=f"/v2/{OTHER_PROJECT}/training-job-engines",
    ),
]

OTHER_CASES = [
    Case(
        "update-description-too-long",
        json_body({"description": "d" * 257}),
        says="description",
        method="PUT",
        path=JOB,
    ),
    Case(
        "update-invalid-json",
        raw("{desc", "application/json"),
        "ModelArts.2787",
        method="PUT",
        path=JOB,
    ),
    Case(
        "terminate-completed",
        TERMINATE,
        "ModelArts.2796",
        "Completed",
        status=409,
        path=JOB + "/actions",
    ),
    Case(
        "unknown-action",
        json_body({"action_type": "explode"}),
        says="action_type",
        path=JOB + "/actions",
    ),
    Case("action-missing", json_body({}), says="action_type", path=JOB + "/actions"),
    Case(
        "action-invalid-json",
        raw("terminate", "application/json"),
        "ModelArts.2787",
        path=JOB + "/actions",
    ),
    Case("search-limit-zero", json_body({"limit": 0}), says="limit", **ON_SEARCH),
    Case("search-limit-too-big", json_body({"limit": 51}), says="limit", **ON_SEARCH),
    Case("search-offset-negative", json_body({"offset": -1}), says="offset", **ON_SEARCH),
    Case("search-sort-by-unknown", json_body({"sort_by": "color"}), says="sort_by", **ON_SEARCH),
    Case("search-order-unknown", json_body({"order": "up"}), says="order", **ON_SEARCH),
    Case("search-invalid-json", raw("{", "application/json"), "ModelArts.2787", **ON_SEARCH),
    Case("filter-key-unknown", flt("owner", "in", ["me"]), says="key", **ON_SEARCH),
    Case("filter-operator-unknown", flt("name", "regex", ["a.*"]), says="operator", **ON_SEARCH),
    Case("filter-phase-unknown", flt("phase", "in", ["Sleeping"]), says="Sleeping", **ON_SEARCH),
    Case(
        "filter-between-one-value", flt("create_time", "between", [1]), says="between", **ON_SEARCH
    ),
    Case("filter-like-on-time", flt("create_time", "like", ["17"]), says="like", **ON_SEARCH),
    Case(
        "filter-time-not-a-number",
        flt("create_time", "between", ["yesterday", "today"]),
        says="create_time",
        **ON_SEARCH,
    ),
    Case("filter-no-values", flt("name", "in", []), says="value", **ON_SEARCH),
    Case("events-level-unknown", params(level="Debug"), says="level", **ON_EVENTS),
    Case("events-limit-too-big", params(limit=101), says="limit", **ON_EVENTS),
    Case("events-limit-zero", params(limit=0), says="limit", **ON_EVENTS),
    Case("events-offset-negative", params(offset=-1), says="offset", **ON_EVENTS),
    Case("events-start-without-end", params(start_time=1), says="end_time", **ON_EVENTS),
    Case("events-order-unknown", params(order="random"), says="order", **ON_EVENTS),
    Case("log-offset-negative", params(offset=-1), says="offset", **ON_LOG),
    Case("log-attempt-zero", params(attempt=0), says="attempt", **ON_LOG),
    Case(
        "flavor-type-unknown",
        params(flavor_type="TPU"),
        says="flavor_type",
        method="GET",
        path="/v2/{pid}/training-job-flavors",
    ),
    Case("unknown-route", nothing, **GATEWAY, path="/v2/{pid}/training-pipelines"),
    Case("unknown-route-outside-v2", nothing, **GATEWAY, path="/nothing/here"),
    Case("unknown-job-subresource", nothing, **GATEWAY, path=JOB + "/snapshots"),
    Case(
        "method-not-allowed",
        json_body({"description": "x"}),
        None,
        method="PATCH",
        path=JOB,
        status=405,
    ),
]

#: beyond what any database integer holds: every such value is a 400, never a 500
HUGE = 10**20
ON_QUOTAS = {"path": "/v2/{pid}/training-quotas", "method": "PUT"}
ON_VERSIONS = {"path": JOB + "/versions"}
ON_ALIAS = {"path": "/v2/{pid}/models/m/aliases/production", "method": "PUT"}


def quota(**fields: Any) -> Build:
    return json_body({"quotas": [{"pool_id": "default", **fields}]})


BOUND_CASES = [
    Case("search-offset-huge", json_body({"offset": HUGE}), says="offset", **ON_SEARCH),
    Case(
        "search-rows-skipped-beyond-64-bits",
        json_body({"offset": 2**62, "limit": 50}),
        says="offset",
        **ON_SEARCH,
    ),
    Case("events-offset-huge", params(offset=HUGE), says="offset", **ON_EVENTS),
    Case("events-times-huge", params(start_time=HUGE, end_time=HUGE), says="time", **ON_EVENTS),
    Case("events-time-negative", params(start_time=-1, end_time=0), says="start_time",
         **ON_EVENTS),
    Case("log-offset-huge", params(offset=HUGE), says="offset", **ON_LOG),
    Case("log-attempt-huge", params(attempt=HUGE), says="attempt", **ON_LOG),
    Case("quota-gpu-huge", quota(gpu=HUGE), says="gpu", **ON_QUOTAS),
    Case("quota-memory-huge", quota(memory_gb=1e300), says="memory_gb", **ON_QUOTAS),
    Case("quota-accelerator-huge", quota(accelerators={"npu": HUGE}), says="npu", **ON_QUOTAS),
    Case("version-from-huge", json_body({"from_version": HUGE}), says="from_version",
         **ON_VERSIONS),
    Case("alias-version-huge", json_body({"version": HUGE}), says="version", **ON_ALIAS),
    Case("model-version-huge", cmd_job(kind="inference", model={"name": "m", "version": HUGE}),
         says="version"),
    Case("filter-time-beyond-year-9999", flt("create_time", "between", ["0", str(2**62)]),
         says="create_time", **ON_SEARCH),
    Case("json-nested-too-deep", raw("[" * 100_000 + "]" * 100_000, "application/json"),
         "ModelArts.2787", **ON_SEARCH),
    # PostgreSQL can neither store nor compare text holding a NUL: refused on every database
    Case("nul-in-a-body", json_body({"description": "a\x00b"}), says="NUL", method="PUT",
         path=JOB),
    Case("nul-in-a-query", params(pattern="a\x00b"), says="pattern", **ON_EVENTS),
    Case("nul-in-a-path", nothing, says="training_job_id", method="GET", path=JOB + "%00"),
]

ALL_CASES = CREATE_CASES + NOT_FOUND_CASES + OTHER_CASES + BOUND_CASES


@pytest.mark.parametrize("case", ALL_CASES, ids=[c.id for c in ALL_CASES])
def test_refused_request_answers_the_error_body_and_changes_nothing(
    world: World, case: Case
) -> None:
    live = world.live
    path = case.path.replace("{pid}", live.project_id).replace("{job}", world.job_id)
    before = snapshot(live)

    r = live.http.request(case.method, path, **case.build(world))

    body = assert_error(r, case.status, case.code)
    assert case.says in body["error_msg"]
    assert snapshot(live) == before


def test_every_case_leaves_the_base_job_as_it_was(world: World) -> None:
    """After all the refusals above (in any order), the one job is intact and still alone."""
    job = world.live.job(world.job_id)
    assert job["metadata"]["name"] == BASE_NAME
    assert job["metadata"]["description"] == ""
    assert job["status"]["phase"] == "Completed"
    assert snapshot(world.live)["total"] == 1


def test_a_refused_submit_does_not_hold_its_name(live_server: conftest.Live) -> None:
    live = live_server
    refused = live.http.post(
        live.path("/training-jobs"),
        json=factories.make_job(name="later", flavor_id="corral.nope", command="true"),
    )
    assert_error(refused, 400, "ModelArts.2763")

    job = live.submit(factories.make_job(name="later", command="true"))
    try:
        assert job["metadata"]["name"] == "later"
        again = live.http.post(
            live.path("/training-jobs"), json=factories.make_job(name="later", command="true")
        )
        assert_error(again, 400, "ModelArts.2751")
    finally:
        live.wait(job["metadata"]["id"])


def test_validation_message_names_the_field(world: World) -> None:
    """A 2788 says where the problem is, not just that there is one."""
    live = world.live
    body = factories.make_job(command="true")
    body["spec"]["resource"]["node_count"] = "many"
    r = live.http.post(live.path("/training-jobs"), json=body)
    err = assert_error(r, 400, "ModelArts.2788")
    assert "node_count" in err["error_msg"]


def test_a_method_a_path_does_not_have_answers_405_with_the_methods_it_has(world: World) -> None:
    live = world.live
    job = live.path(f"/training-jobs/{world.job_id}")
    for method in ("TRACE", "PATCH"):
        r = live.http.request(method, job)
        assert_error(r, 405, None)
        assert sorted(r.headers["allow"].split(", ")) == ["DELETE", "GET", "PUT"]
    r = live.http.request("TRACE", live.path("/training-job-searches"))
    assert_error(r, 405, None)
    assert r.headers["allow"] == "POST"


# --- bodies nested too deep ---------------------------------------------------------------

#: every call that makes something from a body, and the content types it reads
CREATE_CALLS = [
    ("/v2/{pid}/training-jobs", "json"),
    (JOB + "/versions", "json"),
    ("/v2/{pid}/models/m/versions", "json"),
    ("/v2/{pid}/datasets", "json"),
    ("/v2/{pid}/incremental-learning-jobs", "json"),
    ("/v2/{pid}/incremental-learning-jobs", "yaml"),
    ("/v2/{pid}/pipelines", "json"),
    ("/v2/{pid}/pipelines", "yaml"),
    ("/v1/{pid}/notebooks", "json"),
    ("/corral/projects", "json"),
    ("/corral/users", "json"),
    ("/corral/projects/{pid}/keys", "json"),
    ("/corral/tokens", "json"),
]


def _nested(depth: int, inside: bool) -> str:
    """A list `depth` deep: the whole body, or the value of a field of a body that is
    otherwise a mapping (JSON, which is YAML too)."""
    deep = "[" * depth + "]" * depth
    return json.dumps({"metadata": {"name": "deep"}, "description": "x"})[:-1] + (
        f', "deep": {deep}}}') if inside else deep


@pytest.mark.parametrize("inside", [False, True], ids=["whole", "in-a-field"])
@pytest.mark.parametrize(("path", "kind"), CREATE_CALLS,
                         ids=[f"{p.rsplit('}', 1)[-1]}-{k}" for p, k in CREATE_CALLS])
def test_a_body_nested_too_deep_is_a_400_to_every_call_that_creates(
        world: World, path: str, kind: str, inside: bool) -> None:
    live = world.live
    url = path.replace("{pid}", live.project_id).replace("{job}", world.job_id)
    before = snapshot(live)
    r = live.http.post(url, content=_nested(2000, inside), headers={
        "Content-Type": "application/yaml" if kind == "yaml" else "application/json"})
    assert_error(r, 400, None)
    assert snapshot(live) == before


#: a YAML body of a few lines that stands for 10**9 values, once its aliases are expanded
ALIASES = "\n".join(["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"] + [
    f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)])


@pytest.mark.parametrize("path", ["/v2/{pid}/incremental-learning-jobs", "/v2/{pid}/pipelines"])
@pytest.mark.parametrize(("text", "says"), [
    (_nested(100, True), "nests lists or mappings more than 64 deep"),
    (ALIASES, "holds more than 1000000 values"),
], ids=["100-deep", "yaml-aliases"])
def test_the_calls_that_read_yaml_refuse_what_would_take_the_server_deep_or_long(
        world: World, path: str, text: str, says: str) -> None:
    live = world.live
    before = snapshot(live)
    r = live.http.post(path.replace("{pid}", live.project_id), content=text,
                       headers={"Content-Type": "application/yaml"})
    assert says in assert_error(r, 400, "ModelArts.2787")["error_msg"]
    assert snapshot(live) == before
