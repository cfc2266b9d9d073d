"""Pipelines through the REST API and the `corral pipeline` commands, against a live
server: what a user sends and sees, from a YAML file to a repaired pipeline."""

from __future__ import annotations

import json
import pathlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests import conftest, factories
from tests import pipelines as pl
from tests.api.test_cli import assert_one_error_line, corral

pytestmark = pytest.mark.slow


def _wait(live: conftest.Live, pid: str, timeout: float = 30) -> dict[str, Any]:
    def ended() -> Any:
        found = live.http.get(live.path(f"/pipelines/{pid}")).json()
        return found if found["status"]["state"] != "running" else None
    return dict(factories.wait_for(ended, timeout, f"pipeline {pid}"))


def test_the_rest_api_creates_shows_lists_and_repairs_a_pipeline(
        live_server: conftest.Live, tmp_path: pathlib.Path) -> None:
    live, code, fixed = live_server, pl.step_code(tmp_path), tmp_path / "fixed"
    body = pl.pipeline(
        "api-p", pl.task("a", code, outputs=("out_a",)),
        pl.task("b", code, deps=("a",), fail_unless=str(fixed),
                inputs={"in_a": "a.outputs.out_a"}))
    r = live.http.post(live.path("/pipelines"), content=yaml.safe_dump(body),
                       headers={"Content-Type": "application/yaml"})
    assert r.status_code == 201, r.text
    pid = r.json()["id"]

    found = _wait(live, pid)

    assert found["status"]["state"] == "failed" and found["status"]["progress"] == 100
    assert found["status"]["message"].startswith("b failed")
    assert [(t["name"], t["depends_on"], t["trigger"]) for t in found["dag"]] == [
        ("a", [], "all_success"), ("b", ["a"], "all_success")]
    a = next(t for t in found["tasks"] if t["key"] == "a")
    job = live.job(a["job_id"])  # each task links to its training job
    assert job["status"]["phase"] == "Completed" == a["job_phase"]
    listed = live.http.get(live.path("/pipelines"), params={"state": "failed"}).json()
    assert [p["id"] for p in listed["items"]] == [pid] and listed["total"] == 1
    assert live.http.get(live.path("/pipelines"),
                         params={"state": "success"}).json()["total"] == 0
    assert live.http.get(live.path("/pipelines"), params={"name": "api-p"}).json()["total"] == 1

    fixed.touch()
    r = live.http.post(live.path(f"/pipelines/{pid}/actions"), json={"action": "rerun"})
    assert r.status_code == 202, r.text
    found = _wait(live, pid)
    assert found["status"]["state"] == "success" and found["status"]["attempt"] == 2
    assert [t["origin"] for t in found["tasks"]] == ["reused", "run"]
    assert [a["state"] for a in found["attempts"]] == ["failed", "success"]
    assert r.json()["status"]["attempt"] == 2

    r = live.http.post(live.path(f"/pipelines/{pid}/actions"), json={"action": "stop"})
    assert r.status_code == 409 and r.json()["error_code"] == "ModelArts.2796"
    r = live.http.post(live.path(f"/pipelines/{pid}/clean"))
    assert r.status_code == 200, r.text
    assert r.json()["removed"] == [a["outputs"]["out_a"]]
    events = live.http.get(live.path(f"/pipelines/{pid}/events")).json()["events"]
    assert events[-1]["message"].startswith("Cleaned: 1 output folder(s) removed")
    r = live.http.delete(live.path(f"/pipelines/{pid}"))
    assert r.status_code == 202 and r.json() == {"deferred": False, "removed": [], "kept": []}
    assert live.http.get(live.path(f"/pipelines/{pid}")).status_code == 404


@pytest.mark.parametrize(("body", "said"), [
    ({"metadata": {"name": "c"}, "tasks": [
        {"name": "a", "depends_on": ["b"], "algorithm": {"command": "true"}},
        {"name": "b", "depends_on": ["a"], "algorithm": {"command": "true"}}]},
     "cycle: a -> b -> a"),
    ({"metadata": {"name": "f"}, "tasks": [
        {"name": "a", "algorithm": {"command": "true"},
         "spec": {"resource": {"flavor_id": "nope"}}}]}, "task 'a': "),
    ({"metadata": {"name": "x"}, "tasks": []}, "tasks"),
    ("tasks: [unclosed", "not valid JSON or YAML"),
    ([1, 2], "a mapping"),
])
def test_a_pipeline_that_cannot_run_is_refused_with_nothing_made(
        live_server: conftest.Live, body: Any, said: str) -> None:
    text = body if isinstance(body, str) else json.dumps(body)
    r = live_server.http.post(live_server.path("/pipelines"), content=text,
                              headers={"Content-Type": "application/yaml"})
    assert r.status_code == 400 and said in r.json()["error_msg"], r.text
    assert live_server.http.get(live_server.path("/pipelines")).json()["total"] == 0
    assert live_server.http.post(live_server.path("/training-job-searches"),
                                 json={}).json()["total"] == 0


@pytest.fixture
def team(tmp_path: pathlib.Path) -> Iterator[tuple[conftest.Live, conftest.Live, str]]:
    """A server whose projects are confined to their trees; a member of project 'team'."""
    live = conftest.start_live(tmp_path / "home")
    team_id = live.new_project("team")
    yield live, live.new_user("tess", "member", team_id), team_id
    conftest.stop_live(live)


def test_an_output_root_the_project_may_not_write_is_refused_with_nothing_made(
        team: tuple[conftest.Live, conftest.Live, str]) -> None:
    live, member, team_id = team
    own_tree = live.settings.home / "projects" / team_id
    roots = {"/etc/corral": "outside the storage this project may use",
             "s3://bucket/pipelines": "object storage is not configured",
             f"{own_tree}/../{live.project_id}/pipelines":
                 "outside the storage this project may use"}
    for root, said in roots.items():
        body = {"metadata": {"name": "p"}, "output_root": root,
                "tasks": [{"name": "a", "algorithm": {"command": "true"}}]}  # no outputs
        r = member.http.post(f"/v2/{team_id}/pipelines", json=body)
        assert r.status_code == 400, (root, r.text)
        assert r.json()["error_code"] == "ModelArts.2788"
        assert r.json()["error_msg"].startswith("output_root '") and said in (
            r.json()["error_msg"]), r.text
    assert member.http.get(f"/v2/{team_id}/pipelines").json()["total"] == 0
    assert member.http.post(f"/v2/{team_id}/training-job-searches",
                            json={}).json()["total"] == 0
    inside = {"metadata": {"name": "p"}, "output_root": str(own_tree / "pipelines"),
              "tasks": [{"name": "a", "algorithm": {"command": "true"}}]}
    assert member.http.post(f"/v2/{team_id}/pipelines", json=inside).status_code == 201


def test_a_pipeline_is_found_by_id_or_by_name_the_id_first(
        live_server: conftest.Live) -> None:
    live = live_server

    def made(name: str) -> str:
        body = {"metadata": {"name": name}, "tasks": [{"name": "a", "algorithm": {
            "command": "true"}}]}
        r = live.http.post(live.path("/pipelines"), json=body)
        assert r.status_code == 201, r.text
        return str(r.json()["id"])

    first = made("by-name")
    assert live.http.get(live.path("/pipelines/by-name")).json()["id"] == first
    _wait(live, "by-name")
    events = live.http.get(live.path("/pipelines/by-name/events")).json()["events"]
    assert events[0]["message"].startswith("Pipeline created")
    second = made(first)  # named as the first's id: the id is the first's
    assert live.http.get(live.path(f"/pipelines/{first}")).json()["id"] == first
    assert live.http.get(live.path(f"/pipelines/{second}")).json()["name"] == first
    _wait(live, second)
    r = live.http.post(live.path("/pipelines/by-name/actions"), json={"action": "rerun"})
    assert r.status_code == 202 and r.json()["status"]["attempt"] == 2, r.text
    _wait(live, first)
    assert live.http.delete(live.path("/pipelines/by-name")).status_code == 202
    missing = live.http.get(live.path("/pipelines/by-name"))
    assert missing.status_code == 404 and missing.json()["error_msg"] == (
        "pipeline 'by-name' does not exist")


def test_a_viewer_reads_pipelines_but_cannot_run_one(live_server: conftest.Live) -> None:
    viewer = live_server.new_user("vera", "viewer", key=False)
    body = {"metadata": {"name": "v"}, "tasks": [{"name": "a", "algorithm": {"command": "true"}}]}
    assert viewer.http.post(live_server.path("/pipelines"), json=body).status_code == 403
    assert viewer.http.get(live_server.path("/pipelines")).status_code == 200
    assert viewer.http.get(live_server.path("/pipelines/nope")).status_code == 404


def test_members_change_their_own_pipelines_and_project_admins_everyones(
        live_server: conftest.Live, tmp_path: pathlib.Path) -> None:
    live, code, gate = live_server, pl.step_code(tmp_path), tmp_path / "gate"
    alice = live.new_user("alice", "member", key=False)
    bob = live.new_user("bob", "member", key=False)
    boss = live.new_user("boss", "admin", key=False)
    r = alice.http.post(live.path("/pipelines"), json=pl.pipeline(
        "alices", pl.task("a", code, gate=str(gate), outputs=("out_a",))))
    assert r.status_code == 201, r.text
    pid = r.json()["id"]
    assert r.json()["user_name"] == "alice"
    path = live.path(f"/pipelines/{pid}")

    def refused(r: Any) -> None:
        assert r.status_code == 403, r.text
        assert r.json()["error_code"] == "ModelArts.0403"
        assert r.json()["error_msg"] == (
            "this pipeline belongs to alice: only its owner or a project admin may change it")

    def seen() -> dict[str, Any]:
        """What a change would show (not the durations, which grow)."""
        found = live.http.get(path).json()
        events = live.http.get(f"{path}/events").json()["events"]
        return {"status": {k: found["status"][k] for k in ("state", "attempt", "stopping",
                                                           "end_time", "message")},
                "attempts": [(a["number"], a["state"]) for a in found["attempts"]],
                "runs": [(t["key"], t["state"], t["job_id"]) for t in found["tasks"]],
                "events": [e["message"] for e in events]}

    # Running: bob may neither stop nor delete it (nor by its name); nothing changes.
    factories.wait_for(lambda: live.http.get(path).json()["tasks"][0]["job_id"], 30, "a job")
    before = seen()
    refused(bob.http.post(f"{path}/actions", json={"action": "stop"}))
    refused(bob.http.post(live.path("/pipelines/alices/actions"), json={"action": "stop"}))
    refused(bob.http.delete(path))
    assert seen() == before and not before["status"]["stopping"]
    # ... nor in the CLI, which says why in one line.
    bob_home = tmp_path / "bob"
    assert corral(live.url, "login", "--token", bob.token, home=bob_home).exit_code == 0
    for args in (("stop", "alices"), ("delete", "alices")):
        assert_one_error_line(corral(live.url, "pipeline", *args, home=bob_home),
                              "ModelArts.0403: this pipeline belongs to alice")
    assert seen() == before

    # A project admin stops it.
    r = boss.http.post(f"{path}/actions", json={"action": "stop"})
    assert r.status_code == 202, r.text
    assert _wait(live, pid)["status"]["state"] == "canceled"
    gate.touch()
    # Ended: bob may neither rerun, clean nor delete it; nothing changes.
    before = seen()
    refused(bob.http.post(f"{path}/actions", json={"action": "rerun", "mode": "all"}))
    refused(bob.http.post(f"{path}/clean"))
    refused(bob.http.delete(path))
    assert seen() == before and before["status"]["attempt"] == 1

    # Its owner reruns and cleans it, a project admin deletes it.
    r = alice.http.post(f"{path}/actions", json={"action": "rerun"})
    assert r.status_code == 202, r.text
    found = _wait(live, pid)
    assert found["status"]["state"] == "success" and found["status"]["attempt"] == 2
    out = found["tasks"][0]["outputs"]["out_a"]
    refused(bob.http.post(f"{path}/clean"))
    assert pathlib.Path(out).exists()
    r = alice.http.post(f"{path}/clean")
    assert r.status_code == 200 and out in r.json()["removed"], r.text
    r = boss.http.delete(path)
    assert r.status_code == 202, r.text
    assert live.http.get(path).status_code == 404


def test_the_cli_submits_watches_shows_reruns_and_cleans(live_server: conftest.Live,
                                                         tmp_path: pathlib.Path) -> None:
    live, fixed = live_server, tmp_path / "fixed"
    folder = tmp_path / "project"
    code = pl.step_code(folder)
    body = pl.pipeline(
        "cli-p", pl.task("prep", code, outputs=("out_d",)),
        pl.task("train", code, deps=("prep",), fail_unless=str(fixed),
                inputs={"in_d": "prep.outputs.out_d"}, outputs=("out_m",),
                for_each=[{"tag": "x"}, {"tag": "y"}]))
    for t in body["tasks"]:  # relative to the file, as people write them
        t["algorithm"]["code_dir"] = code.name
    path = folder / "pipeline.yaml"
    path.write_text(yaml.safe_dump(body))

    result = corral(live, "pipeline", "submit", str(path), "--watch")

    assert result.exit_code == 1, result.output
    assert "train[1]" in result.stdout and "upstream_failed" not in result.stdout
    assert "error: pipeline cli-p ended failed: train" in result.stderr
    shown = corral(live, "pipeline", "show", "cli-p")
    assert shown.exit_code == 0, shown.output
    lines = shown.stdout.splitlines()
    assert lines[0].startswith("cli-p failed 100%  attempt 1")
    assert any("prep  success" in line and "job " in line for line in lines)
    assert any("train[0]  failed" in line for line in lines)

    fixed.touch()
    result = corral(live, "pipeline", "rerun", "cli-p", "--from", "train", "--watch")
    assert result.exit_code == 0, result.output
    assert "attempt 2 started" in result.stdout
    listed = corral(live, "pipeline", "list", "--state", "success")
    assert "cli-p" in listed.stdout and "100%" in listed.stdout
    cleaned = corral(live, "pipeline", "clean", "cli-p")
    assert cleaned.exit_code == 0, cleaned.output
    removed = [line for line in cleaned.stdout.splitlines() if line.startswith("removed ")]
    # prep's output, and train's items' of both attempts: every one its own folder
    assert len(removed) == 5 and "5 output folder(s) removed" in cleaned.stdout
    events = corral(live, "pipeline", "events", "cli-p")
    assert "Rerun (from task train) as attempt 2" in events.stdout
    deleted = corral(live, "pipeline", "delete", "cli-p")
    assert deleted.exit_code == 0, deleted.output
    assert "cli-p" not in corral(live, "pipeline", "list").stdout


def test_the_cli_refuses_an_unknown_key_with_the_one_meant(live_server: conftest.Live,
                                                           tmp_path: pathlib.Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump({"metadata": {"name": "k"}, "tasks": [
        {"name": "a", "depends": ["b"], "algorithm": {"command": "true"}}]}))
    result = corral(live_server, "pipeline", "submit", str(path))
    assert result.exit_code == 1
    assert "tasks[0].depends (did you mean depends_on?)" in result.stderr


@pytest.mark.parametrize("path", ["/pipelines", "/incremental-learning-jobs"])
def test_a_large_yaml_body_being_read_holds_no_other_request_back(
        live_server: conftest.Live, path: str) -> None:
    # Reading a YAML body under the size cap takes seconds of pure Python: on the event
    # loop, every other request (health checks, log streams) waited for it.
    live = live_server
    body = ("tasks: [" + ", ".join(["{a: 1}"] * 40_000) + "]\n").encode()
    answered: list[int] = []

    def create() -> None:
        r = live.http.post(live.path(path), content=body,
                           headers={"Content-Type": "application/yaml"}, timeout=120)
        answered.append(r.status_code)

    thread = threading.Thread(target=create)
    thread.start()
    try:
        # A moment in, the body is being read (it takes a second or more); the server still
        # answers, before the create does.
        time.sleep(0.2)
        assert live.http.get("/healthz").status_code == 200
        assert not answered, "the create was answered first: the body was read too fast " \
                             "for this test, or the health check waited for it"
    finally:
        thread.join(120)
    assert answered and answered[0] == 400
