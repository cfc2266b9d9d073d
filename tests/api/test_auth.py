"""Who may do what, over real HTTP against a live server; every refusal changes nothing.

Signed requests are made with the official SDK's signer (not corral's), then sent raw, so
that a tampered copy can be replayed.
"""

from __future__ import annotations

import datetime
import json
import pathlib
import sqlite3
import time
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlparse

import httpx
import pytest
from huaweicloudsdkcore.auth.credentials import BasicCredentials
from huaweicloudsdkcore.sdk_request import SdkRequest
from huaweicloudsdkcore.signer.signer import Signer

from corral.sdk import credentials
from tests import conftest, factories

BAD_CREDENTIAL = (401, "ModelArts.2784")
NOT_YOURS = (404, "ModelArts.2786")
FORBIDDEN = (403, "ModelArts.0403")


@pytest.fixture
def live(live_server: conftest.Live) -> Iterator[conftest.Live]:
    yield live_server
    found = live_server.http.post(live_server.path("/training-job-searches"),
                                  json={"limit": 50}).json()
    for job in found.get("items", []):
        live_server.http.post(live_server.path(f"/training-jobs/{job['metadata']['id']}/actions"),
                              json={"action_type": "terminate"})


def refusal(r: httpx.Response) -> tuple[int, str]:
    return r.status_code, r.json()["error_code"]


def sdk_request(live: conftest.Live, method: str, path: str, *, ak: str, sk: str,
                body: bytes = b"", query: list[tuple[str, Any]] | None = None,
                date: datetime.datetime | None = None) -> tuple[str, dict[str, str]]:
    """(path and query, headers) of a request signed by the SDK's signer."""
    headers = {"Content-Type": "application/json", "X-Project-Id": live.project_id}
    if date is not None:
        headers["X-Sdk-Date"] = date.strftime("%Y%m%dT%H%M%SZ")
    req = SdkRequest(method=method, schema="http", host=urlparse(live.url).netloc,
                     resource_path=path, query_params=list(query or []), header_params=headers,
                     body=body)
    Signer(BasicCredentials(ak, sk)).sign(req)
    return req.uri, dict(req.header_params)


def send(live: conftest.Live, method: str, uri: str, headers: dict[str, str],
         body: bytes = b"") -> httpx.Response:
    with httpx.Client(base_url=live.url, timeout=30) as http:
        return http.request(method, uri, headers=headers, content=body)


def job_count(live: conftest.Live, project_id: str | None = None) -> int:
    r = live.http.post(live.path("/training-job-searches", project_id), json={"limit": 1})
    assert r.status_code == 200, r.text
    return int(r.json()["total"])


def create_body(name: str = "signed") -> bytes:
    return json.dumps(factories.make_job(name=name, command="sleep 30")).encode()


# --- signatures --------------------------------------------------------------------------


def test_a_signed_create_runs_and_its_replay_with_another_body_is_refused(
        live: conftest.Live) -> None:
    ak, sk = live.login.access_key or "", live.login.secret_key or ""
    path = live.path("/training-jobs")
    uri, headers = sdk_request(live, "POST", path, ak=ak, sk=sk, body=create_body("first"))

    assert send(live, "POST", uri, headers, create_body("first")).status_code == 201
    replayed = send(live, "POST", uri, headers, create_body("altered"))

    assert refusal(replayed) == BAD_CREDENTIAL
    assert "signature does not match" in replayed.json()["error_msg"]
    assert job_count(live) == 1


@pytest.mark.parametrize("case", ["unsigned", "wrong-secret", "unknown-key", "expired",
                                  "future", "both-credentials", "bad-token"])
def test_a_request_without_a_valid_credential_is_refused_and_changes_nothing(
        live: conftest.Live, case: str) -> None:
    ak, sk = live.login.access_key or "", live.login.secret_key or ""
    path, body = live.path("/training-jobs"), create_body()
    now = datetime.datetime.now(datetime.UTC)
    kw: dict[str, Any] = {"ak": ak, "sk": sk, "body": body}
    if case == "wrong-secret":
        kw["sk"] = "x" * 40
    elif case == "unknown-key":
        kw["ak"] = "NOSUCHKEY00000000000"
    elif case == "expired":
        kw["date"] = now - datetime.timedelta(minutes=16)
    elif case == "future":
        kw["date"] = now + datetime.timedelta(minutes=16)
    uri, headers = sdk_request(live, "POST", path, **kw)
    if case == "unsigned":
        headers = {"Content-Type": "application/json"}
    elif case == "both-credentials":
        headers["X-Auth-Token"] = live.login.token or ""
    elif case == "bad-token":
        headers = {"Content-Type": "application/json", "X-Auth-Token": "crl_not-a-token"}

    r = send(live, "POST", uri, headers, body)

    assert refusal(r) == BAD_CREDENTIAL, r.text
    assert live.login.token not in r.text and sk not in r.text
    assert job_count(live) == 0


def test_every_endpoint_but_health_and_docs_needs_a_credential(live: conftest.Live) -> None:
    spec = live.http.get("/openapi.json").json()
    with httpx.Client(base_url=live.url, timeout=30) as anonymous:
        assert anonymous.get("/healthz").status_code == 200
        assert anonymous.get("/openapi.json").status_code == 200
        for template, ops in spec["paths"].items():
            path = fill(template, live.project_id, str(uuid.uuid4()))
            for method in ops:
                r = anonymous.request(method, path, json={})
                if template.startswith("/corral/log-links/"):  # its signature is its own
                    assert r.json()["error_code"] == "ModelArts.2788", r.text  # no link
                    continue
                assert refusal(r) == BAD_CREDENTIAL, (method, template, r.text)


# --- projects and roles ------------------------------------------------------------------


def fill(template: str, project_id: str, job_id: str) -> str:
    values = {"project_id": project_id, "project": project_id, "training_job_id": job_id,
              "task_id": "worker-0",
              "user_name": "nobody", "access_key": "NOSUCHKEY", "token_id": "nosuch",
              "version": "V0001", "model_name": "nosuchmodel", "alias": "production",
              "dataset": "nosuchdataset", "job": "nosuchloop", "pipeline_id": "nosuch",
              "notebook_id": "nosuchnotebook", "algorithm_type": "hyperparameter_search",
              "algorithm_name": "tpe_search", "trial_id": "0", "parameter_name": "lr",
              "algorithm_id": "nosuchalgorithm"}
    for name, value in values.items():
        template = template.replace("{" + name + "}", value)
    assert "{" not in template, template
    return template


def project_routes(live: conftest.Live) -> list[tuple[str, str]]:
    """(method, path template) of every route under /v2/{project_id}, from the schema."""
    spec = live.http.get("/openapi.json").json()
    return [(m.upper(), p) for p, ops in spec["paths"].items() if "{project_id}" in p
            for m in ops]


def required_query(live: conftest.Live, method: str, template: str,
                   job_id: str) -> dict[str, str]:
    """A value for each query parameter the route requires (a search's `q`, a job id)."""
    spec = live.http.get("/openapi.json").json()
    query = [p for p in spec["paths"][template][method.lower()].get("parameters", [])
             if p["in"] == "query"]
    values = {p["name"]: job_id if p["name"].endswith("job_id") else "x"
              for p in query if p.get("required")}
    if any(p["name"] == "timeout" for p in query):
        values["timeout"] = "1"  # a stream: it ends after a second instead of holding on
    return values


def test_a_job_of_another_project_answers_as_one_that_does_not_exist(
        live: conftest.Live) -> None:
    job = live.submit(factories.make_job(command="sleep 30"))["metadata"]["id"]
    other = live.new_project("elsewhere")
    stranger = live.new_user("stranger", "admin", other)
    before = live.job(job)

    for method, template in project_routes(live):
        if "/corral/" in template:
            continue
        for job_id in (job, str(uuid.uuid4())):
            r = stranger.http.request(method, fill(template, live.project_id, job_id),
                                      json={"action_type": "terminate", "description": "x"})
            assert refusal(r) == NOT_YOURS, (method, template, r.text)
        # ... exactly as a project that does not exist at all.
        r = stranger.http.request(method, fill(template, "0" * 32, job),
                                  json={"action_type": "terminate", "description": "x"})
        assert refusal(r) == NOT_YOURS
    after = live.job(job)
    assert after["metadata"]["description"] == before["metadata"]["description"]
    assert after["status"]["phase"] in {"Creating", "Pending", "Running"}
    assert job_count(stranger_live(live, stranger), other) == 0


def stranger_live(live: conftest.Live, who: conftest.Identity) -> conftest.Live:
    """`live` seen as `who`."""
    import dataclasses

    return dataclasses.replace(live, http=who.http, project_id=who.project_id)


def test_a_key_reaches_only_its_own_project_even_for_a_platform_admin(
        live: conftest.Live) -> None:
    other = live.new_project("other")
    key = live.new_key(project_id=other)  # the platform admin's key, for `other`

    uri, headers = sdk_request(live, "POST", live.path("/training-job-searches"),
                               ak=key["access_key"], sk=key["secret_key"], body=b"{}")
    assert refusal(send(live, "POST", uri, headers, b"{}")) == NOT_YOURS
    uri, headers = sdk_request(live, "POST", live.path("/training-job-searches", other),
                               ak=key["access_key"], sk=key["secret_key"], body=b"{}")
    assert send(live, "POST", uri, headers, b"{}").status_code == 200


def test_a_viewer_reads_but_changes_nothing(live: conftest.Live) -> None:
    job = live.submit(factories.make_job(command="sleep 30"))["metadata"]["id"]
    viewer = live.new_user("watcher", "viewer")

    for method, template in project_routes(live):
        if "/corral/" in template:
            continue
        r = viewer.http.request(method, fill(template, live.project_id, job),
                                json={"action_type": "terminate", "description": "x",
                                      **json.loads(create_body("by-viewer"))},
                                params=required_query(live, method, template, job))
        if method == "GET" and (any(f"{{{name}}}" in template for name in
                                    ("model_name", "dataset", "job", "pipeline_id",
                                     "notebook_id", "algorithm_id")) or "/autosearch-" in template):
            # read, but there is no such model, dataset, loop, pipeline or notebook (or
            # the job is no hyperparameter search)
            assert r.status_code == 404, (method, template, r.text)
        elif method == "GET" or template.endswith("/training-job-searches"):
            assert r.status_code == 200, (method, template, r.text)
        else:
            assert refusal(r) == FORBIDDEN, (method, template, r.text)
    assert job_count(live) == 1
    assert live.job(job)["status"]["phase"] in {"Creating", "Pending", "Running"}
    assert live.job(job)["metadata"]["description"] == ""


def test_members_change_their_own_jobs_and_project_admins_everyones(
        live: conftest.Live) -> None:
    alice = live.new_user("alice", "member")
    bob = live.new_user("bob", "member")
    boss = live.new_user("boss", "admin")
    r = alice.http.post(live.path("/training-jobs"), json=factories.make_job(command="sleep 30"))
    assert r.status_code == 201, r.text
    job = r.json()["metadata"]["id"]
    assert r.json()["metadata"]["user_name"] == "alice"
    job_path = live.path(f"/training-jobs/{job}")

    assert refusal(bob.http.put(job_path, json={"description": "bob was here"})) == FORBIDDEN
    assert refusal(bob.http.post(job_path + "/actions",
                                 json={"action_type": "terminate"})) == FORBIDDEN
    assert refusal(bob.http.delete(job_path)) == FORBIDDEN
    assert bob.http.get(job_path).status_code == 200
    assert live.job(job)["metadata"]["description"] == ""
    assert alice.http.put(job_path, json={"description": "mine"}).status_code == 200
    assert boss.http.post(job_path + "/actions", json={"action_type": "terminate"}
                          ).status_code == 202
    live.wait(job)


def test_members_make_versions_of_their_own_jobs_and_project_admins_of_everyones(
        live: conftest.Live) -> None:
    """A version joins its job's family and writes into the family's outputs: making one
    is a change to that job, allowed to its owner and to project admins only."""
    alice = live.new_user("alice", "member")
    bob = live.new_user("bob", "member")
    boss = live.new_user("boss", "admin")
    r = alice.http.post(live.path("/training-jobs"), json=factories.make_job(command="sleep 30"))
    assert r.status_code == 201, r.text
    versions = live.path(f"/training-jobs/{r.json()['metadata']['id']}/versions")

    assert refusal(bob.http.post(versions, json={})) == FORBIDDEN
    assert [v["version_name"] for v in live.http.get(versions).json()["versions"]] == ["V0001"]
    by_boss = boss.http.post(versions, json={})
    assert by_boss.status_code == 201, by_boss.text
    # The family stays alice's: she may go on from the version her project admin made.
    from_boss = live.path(f"/training-jobs/{by_boss.json()['metadata']['id']}/versions")
    assert alice.http.post(from_boss, json={}).status_code == 201
    assert refusal(bob.http.post(from_boss, json={})) == FORBIDDEN
    names = [v["version_name"] for v in live.http.get(versions).json()["versions"]]
    assert names == ["V0001", "V0002", "V0003"]


def test_a_project_or_user_name_taken_answers_409(live: conftest.Live) -> None:
    live.new_project("vision")
    live.new_user("ana", key=False)
    for path, name in (("/corral/projects", "vision"), ("/corral/projects", "default"),
                       ("/corral/users", "ana"), ("/corral/users", "admin")):
        r = live.http.post(path, json={"name": name})
        assert refusal(r) == (409, "ModelArts.2751"), r.text
        assert name in r.json()["error_msg"]
    assert [p["name"] for p in live.http.get("/corral/projects").json()["projects"]] == [
        "default", "vision"]


def test_only_a_platform_admin_manages_projects_and_users(live: conftest.Live) -> None:
    boss = live.new_user("boss", "admin")

    assert refusal(boss.http.post("/corral/projects", json={"name": "mine"})) == FORBIDDEN
    assert refusal(boss.http.post("/corral/users", json={"name": "eve"})) == FORBIDDEN
    assert refusal(boss.http.get("/corral/users")) == FORBIDDEN
    assert refusal(boss.http.put(f"/corral/projects/{live.project_id}/members/boss",
                                 json={"role": "admin"})) == FORBIDDEN
    names = [u["name"] for u in live.http.get("/corral/users").json()["users"]]
    assert names == ["admin", "boss"]
    assert [p["name"] for p in live.http.get("/corral/projects").json()["projects"]] == [
        "default"]


# --- credentials: issue, list, revoke ----------------------------------------------------


def test_a_revoked_key_or_token_or_membership_stops_working_at_once(
        live: conftest.Live) -> None:
    carol = live.new_user("carol", "member")
    search = live.path("/training-job-searches")

    def signed_search() -> httpx.Response:
        uri, headers = sdk_request(live, "POST", search, ak=carol.access_key,
                                   sk=carol.secret_key, body=b"{}")
        return send(live, "POST", uri, headers, b"{}")

    assert signed_search().status_code == 200
    r = carol.http.delete(f"/corral/projects/{live.project_id}/keys/{carol.access_key}")
    assert r.status_code == 204, r.text
    assert refusal(signed_search()) == BAD_CREDENTIAL

    extra = carol.http.post("/corral/tokens", json={"description": "script"}).json()
    with conftest.http_client(live.url, extra["token"]) as script:
        assert script.post(search, json={}).status_code == 200
        assert carol.http.delete(f"/corral/tokens/{extra['id']}").status_code == 204
        assert refusal(script.post(search, json={})) == BAD_CREDENTIAL

    assert carol.http.post(search, json={}).status_code == 200
    assert live.http.delete(f"/corral/projects/{live.project_id}/members/carol"
                            ).status_code == 200
    assert refusal(carol.http.post(search, json={})) == NOT_YOURS
    assert live.http.delete("/corral/users/carol").status_code == 204
    assert refusal(carol.http.post(search, json={})) == BAD_CREDENTIAL


def test_a_remembered_token_is_still_refused_once_it_expires(tmp_path: pathlib.Path) -> None:
    live = conftest.start_live(tmp_path / "home", auth_cache_seconds=600)
    try:
        made = live.http.post("/corral/tokens", json={"description": "short",
                                                      "ttl_s": 60}).json()
        with conftest.http_client(live.url, made["token"]) as script:
            assert script.get("/corral/whoami").status_code == 200  # now remembered
            ctx = live.embedded.platform.context
            ctx.clock = lambda: made["expires_at"] / 1000 + 1  # a minute later
            assert refusal(script.get("/corral/whoami")) == BAD_CREDENTIAL
    finally:
        conftest.stop_live(live)


def test_a_token_revoked_behind_the_servers_back_stops_working_within_the_cache_time(
        tmp_path: pathlib.Path) -> None:
    live = conftest.start_live(tmp_path / "home", auth_cache_seconds=0.5)
    try:
        made = live.http.post("/corral/tokens", json={"description": "x"}).json()
        with conftest.http_client(live.url, made["token"]) as script:
            assert script.get("/corral/whoami").status_code == 200
            with sqlite3.connect(live.settings.home / "corral.db") as db:  # another process
                db.execute("UPDATE tokens SET revoked_at = 1 WHERE id = ?", (made["id"],))
            time.sleep(0.6)
            assert refusal(script.get("/corral/whoami")) == BAD_CREDENTIAL
    finally:
        conftest.stop_live(live)


def test_a_token_made_with_a_key_reaches_only_the_keys_project(live: conftest.Live) -> None:
    other = live.new_project("other")
    dave = live.new_user("dave", "member")
    assert live.http.put(f"/corral/projects/{other}/members/dave",
                         json={"role": "member"}).status_code == 200
    body = b'{"description": "from my key"}'
    uri, headers = sdk_request(live, "POST", "/corral/tokens", ak=dave.access_key,
                               sk=dave.secret_key, body=body)
    made = send(live, "POST", uri, headers, body)
    assert made.status_code == 201, made.text
    assert made.json()["project_id"] == live.project_id

    with conftest.http_client(live.url, made.json()["token"]) as scoped:
        assert scoped.post(live.path("/training-job-searches"), json={}).status_code == 200
        assert refusal(scoped.post(live.path("/training-job-searches", other), json={})
                       ) == NOT_YOURS
    assert dave.http.post(live.path("/training-job-searches", other), json={}
                          ).status_code == 200


def test_keys_are_listed_without_secrets_and_project_admins_see_all(
        live: conftest.Live) -> None:
    erin = live.new_user("erin", "member")
    frank = live.new_user("frank", "member")
    keys = f"/corral/projects/{live.project_id}/keys"

    mine = erin.http.get(keys).json()["keys"]
    everyone = live.http.get(keys).json()["keys"]

    assert [k["access_key"] for k in mine] == [erin.access_key]
    assert {erin.access_key, frank.access_key, live.login.access_key} <= {
        k["access_key"] for k in everyone}
    assert all("secret_key" not in k for k in everyone)
    assert erin.secret_key not in live.http.get(keys).text
    r = erin.http.delete(f"{keys}/{frank.access_key}")
    assert refusal(r) == (404, "ModelArts.2775")
    assert live.http.delete(f"{keys}/{frank.access_key}").status_code == 204


def test_secrets_are_stored_sealed_or_hashed_and_never_logged(
        live: conftest.Live, caplog: pytest.LogCaptureFixture) -> None:
    gina = live.new_user("gina", "member")
    home = live.settings.home

    dump = "\n".join(sqlite3.connect(home / "corral.db").iterdump())

    for secret in (gina.secret_key, gina.token, live.login.secret_key, live.login.token):
        assert secret and secret not in dump
        assert secret not in caplog.text
    assert gina.access_key in dump  # the public half is stored as it is
    key_file = home / "server.key"
    assert key_file.stat().st_mode & 0o777 == 0o600
    assert (home / "credentials.json").stat().st_mode & 0o777 == 0o600
    assert key_file.read_text().strip() not in dump


def test_the_first_start_writes_a_login_the_cli_uses(live: conftest.Live) -> None:
    login = credentials.read(live.settings.credentials_file)

    assert login is not None and login.user == "admin"
    assert login.project_id == live.project_id
    me = live.http.get("/corral/whoami").json()
    assert me["user"] == "admin" and me["is_admin"] is True
    assert me["projects"] == [{"project_id": live.project_id, "name": "default",
                               "created_at": me["projects"][0]["created_at"], "role": "admin"}]


def test_a_restart_keeps_credentials_and_creates_no_second_admin(tmp_path: pathlib.Path
                                                                ) -> None:
    first = conftest.start_live(tmp_path / "home")
    login = first.login
    conftest.stop_live(first)

    second = conftest.start_live(tmp_path / "home")
    try:
        assert second.login == login
        assert second.http.get("/corral/whoami").status_code == 200
        assert [u["name"] for u in second.http.get("/corral/users").json()["users"]] == [
            "admin"]
    finally:
        conftest.stop_live(second)
