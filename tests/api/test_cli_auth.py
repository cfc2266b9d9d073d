"""`corral login`, `keys`, `token`, `projects`, `users` against a live server, as a user runs them.

Each user gets a CORRAL_HOME of their own (where `corral login` keeps the credential), so
these are separate people on one machine.
"""

from __future__ import annotations

import json
import pathlib

import httpx
import pytest

from corral.sdk import credentials
from tests import conftest
from tests.api.test_cli import assert_one_error_line, corral

pytestmark = pytest.mark.slow


def ok(result: object) -> str:
    assert result.exit_code == 0, result.output  # type: ignore[attr-defined]
    return str(result.stdout)  # type: ignore[attr-defined]


def test_an_admin_brings_in_a_user_who_logs_in_and_makes_a_key(
        live_server: conftest.Live, tmp_path: pathlib.Path) -> None:
    live = live_server
    made = json.loads(ok(corral(live, "projects", "create", "vision", "--json")))
    token = json.loads(ok(corral(live, "users", "create", "ana", "--project", "vision",
                                 "--role", "member", "--json")))["token"]
    ana_home = tmp_path / "ana"

    said = ok(corral(live.url, "login", "--token", token, home=ana_home))
    key = json.loads(ok(corral(live.url, "keys", "create", "--json", home=ana_home)))
    listed = json.loads(ok(corral(live.url, "keys", "list", "--json", home=ana_home)))
    projects = json.loads(ok(corral(live.url, "projects", "--json", home=ana_home)))

    assert "ana" in said and "vision" in said
    assert set(key) == {"access_key", "secret_key", "project_id"}
    assert key["project_id"] == made["project_id"]
    assert [k["access_key"] for k in listed["keys"]] == [key["access_key"]]
    assert key["secret_key"] not in json.dumps(listed)
    assert [p["name"] for p in projects["projects"]] == ["vision"]
    login = credentials.read(ana_home / "credentials.json")
    assert login is not None and login.project_id == made["project_id"] and login.url == live.url
    # Ana is no platform admin.
    assert_one_error_line(corral(live.url, "users", home=ana_home), "ModelArts.0403: ")


def test_a_key_pair_login_signs_its_requests_and_token_prints_one_for_curl(
        live_server: conftest.Live, tmp_path: pathlib.Path) -> None:
    live = live_server
    key = json.loads(ok(corral(live, "keys", "create", "--json")))
    home = tmp_path / "scripts"

    ok(corral(live.url, "login", "--access-key", key["access_key"], "--secret-key",
              key["secret_key"], home=home))
    flavors = json.loads(ok(corral(live.url, "flavors", "--json", home=home)))
    token = ok(corral(live.url, "token", home=home)).strip()
    # What `curl -H "X-Auth-Token: $(corral token)" ...` sends.
    plain = httpx.get(f"{live.url}/v2/{live.project_id}/training-job-flavors",
                      headers={"X-Auth-Token": token}, timeout=30)

    assert flavors["flavors"]
    assert plain.status_code == 200, plain.text
    assert plain.json()["total_count"] == len(flavors["flavors"])
    assert ok(corral(live.url, "token", home=home)).strip() == token  # kept in the login


def test_a_revoked_key_stops_the_cli_at_once(live_server: conftest.Live,
                                             tmp_path: pathlib.Path) -> None:
    live = live_server
    key = json.loads(ok(corral(live, "keys", "create", "--json")))
    home = tmp_path / "ci"
    ok(corral(live.url, "login", "--access-key", key["access_key"], "--secret-key",
              key["secret_key"], home=home))
    ok(corral(live.url, "jobs", home=home))

    ok(corral(live, "keys", "revoke", key["access_key"]))

    assert_one_error_line(corral(live.url, "jobs", home=home), "ModelArts.2784: ")


def test_login_with_a_bad_token_is_one_error_line_and_writes_nothing(
        live_server: conftest.Live, tmp_path: pathlib.Path) -> None:
    result = corral(live_server.url, "login", "--token", "crl_nope", home=tmp_path / "x")

    assert_one_error_line(result, "ModelArts.2784: ")
    assert not (tmp_path / "x" / "credentials.json").exists()


def test_whoami_and_users_show_roles(live_server: conftest.Live) -> None:
    live = live_server
    ok(corral(live, "users", "create", "bo", "--role", "viewer"))

    me = json.loads(ok(corral(live, "whoami", "--json")))
    users = json.loads(ok(corral(live, "users", "--json")))["users"]

    assert me["user"] == "admin" and me["is_admin"]
    assert {u["name"]: u["projects"] for u in users}["bo"] == {live.project_id: "viewer"}
    assert "bo" in ok(corral(live, "users"))
