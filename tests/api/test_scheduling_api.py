"""training-quotas, training-pools, training-queue, the scheduling fields of a Job, and the
`corral queue`, `corral pools` and `corral quota` commands, against a live server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests import conftest, factories
from tests.api.test_cli import corral
from tests.api.test_jobs_api import stop_all, wait_running

pytestmark = pytest.mark.slow


@pytest.fixture
def live(tmp_path: Any) -> Iterator[conftest.Live]:
    live = conftest.start_live(tmp_path / "home", cpus=2)
    yield live
    stop_all(live)
    conftest.stop_live(live)


def put(live: conftest.Live, body: Any) -> Any:
    return live.http.put(live.path("/training-quotas"), json=body)


def wait_code(job: dict[str, Any]) -> str | None:
    """Why a job waits (None while it is still being admitted, or running)."""
    return (job["status"].get("queue") or {}).get("wait_code")


def test_quotas_are_empty_then_set_then_shown(live: conftest.Live) -> None:
    r = live.http.get(live.path("/training-quotas"))
    assert r.status_code == 200
    assert r.json() == {"project_id": live.project_id, "quotas": []}
    r = put(live, {"quotas": [{"pool_id": "default", "cpu": 1.5, "memory_gb": 4, "gpu": 0,
                               "borrowing": True, "weight": 2}]})
    assert r.status_code == 200, r.text
    expected = [{"pool_id": "default", "limits": {"cpu": 1.5, "memory_gb": 4.0, "gpu": 0},
                 "borrowing": True, "weight": 2.0,
                 "used": {"cpu": 0, "memory_gb": 0, "gpu": 0}}]
    assert r.json()["quotas"] == expected
    assert live.http.get(live.path("/training-quotas")).json()["quotas"] == expected
    assert put(live, {"quotas": []}).json()["quotas"] == []


@pytest.mark.parametrize("body, words", [
    ({"quotas": [{"pool_id": "nope", "cpu": 1}]}, "pool_id 'nope' does not exist"),
    ({"quotas": [{"pool_id": "default", "cpu": -1}]}, "cpu"),
    ({"quotas": [{"pool_id": "default", "weight": 0}]}, "weight"),
    ({"quotas": [{"pool_id": "default"}, {"pool_id": "default"}]}, "pool given twice"),
    ({"quotas": [{"pool_id": "default", "cpus": 1}]}, "cpus"),
    ({"quota": []}, "quota"),
])
def test_bad_quotas_are_refused_and_change_nothing(live: conftest.Live, body: Any,
                                                   words: str) -> None:
    assert put(live, {"quotas": [{"pool_id": "default", "gpu": 1}]}).status_code == 200
    r = put(live, body)
    assert r.status_code == 400, r.text
    assert r.json()["error_code"] in ("ModelArts.2788", "ModelArts.2787")
    assert words in r.json()["error_msg"]
    assert live.http.get(live.path("/training-quotas")).json()["quotas"][0]["limits"] == {
        "gpu": 1}


def test_only_a_platform_admin_sets_quotas(live: conftest.Live) -> None:
    """A project's own admin may read its quotas but not raise them."""
    assert put(live, {"quotas": [{"pool_id": "default", "cpu": 1}]}).status_code == 200
    for role in ("admin", "member", "viewer"):
        who = live.new_user(f"q-{role}", role=role, key=False)
        assert who.http.get(live.path("/training-quotas")).status_code == 200
        r = who.http.put(live.path("/training-quotas"), json={"quotas": []})
        assert (r.status_code, r.json()["error_code"]) == (403, "ModelArts.0403"), role
    limits = live.http.get(live.path("/training-quotas")).json()["quotas"][0]["limits"]
    assert limits == {"cpu": 1.0}


def test_quotas_of_an_unknown_project_are_not_found(live: conftest.Live) -> None:
    r = live.http.get("/v2/nope/training-quotas")
    assert (r.status_code, r.json()["error_code"]) == (404, "ModelArts.2786")
    r = live.http.put("/v2/nope/training-quotas", json={"quotas": []})
    assert (r.status_code, r.json()["error_code"]) == (404, "ModelArts.2786")


def test_a_job_shows_its_pool_priority_and_place_in_the_queue(live: conftest.Live) -> None:
    blocker = live.submit(factories.make_job(command="sleep 30", flavor_id="corral.cpu.full"))
    wait_running(live, blocker["metadata"]["id"])
    body = factories.make_job(command="true", flavor_id="corral.cpu.full")
    body["spec"]["schedule_policy"] = {"priority": 2, "preemptible": True,
                                       "placement": "spread"}
    head = live.submit(body)["metadata"]["id"]
    behind = live.submit(factories.make_job(command="true"))["metadata"]["id"]

    # A job is Creating (no queue place yet) until the scheduler's next pass admits it.
    job = factories.wait_for(lambda: wait_code(j := live.job(head)) == "no_capacity" and j,
                             what="the head to wait")
    assert job["spec"]["resource"]["pool_id"] == "default"
    assert job["spec"]["schedule_policy"] == {"priority": 2, "preemptible": True,
                                              "placement": "spread"}
    assert job["status"]["queue"] == {"pool_id": "default", "priority": 2, "jobs_ahead": 0,
                                      "wait_code": "no_capacity"}
    other = factories.wait_for(lambda: wait_code(j := live.job(behind)) == "behind_priority"
                               and j, what="the low job to wait")
    assert other["status"]["queue"]["jobs_ahead"] == 1
    assert other["status"]["reason"].startswith("waiting behind higher priority")

    result = corral(live, "queue")
    assert result.exit_code == 0, result.output
    assert "pool default: 2 waiting" in result.output
    assert "behind_priority" in result.output and "no_capacity" in result.output
    queue = json.loads(corral(live, "queue", "--json").stdout)["pools"][0]["jobs"]
    assert [(j["id"], j["position"]) for j in queue] == [(head, 1), (behind, 2)]
    shown = corral(live, "show", behind)
    assert "#2 in pool default, wait code behind_priority" in shown.output


def test_bad_scheduling_fields_are_refused(live: conftest.Live) -> None:
    for policy, words in (({"priority": 4}, "priority"), ({"placement": "round"}, "placement")):
        body = factories.make_job(command="true")
        body["spec"]["schedule_policy"] = policy
        r = live.http.post(live.path("/training-jobs"), json=body)
        assert r.status_code == 400 and words in r.json()["error_msg"], r.text
    body = factories.make_job(command="true")
    body["spec"]["resource"]["pool_id"] = "elsewhere"
    r = live.http.post(live.path("/training-jobs"), json=body)
    assert (r.status_code, r.json()["error_code"]) == (400, "ModelArts.2788")
    assert "pool_id 'elsewhere' does not exist; known pools: default" in r.json()["error_msg"]


def test_pools_show_capacity_use_and_quota_per_project(live: conftest.Live) -> None:
    put(live, {"quotas": [{"pool_id": "default", "cpu": 2, "borrowing": False}]})
    running = live.submit(factories.make_job(command="sleep 30"))["metadata"]["id"]
    wait_running(live, running)
    found = live.http.get(live.path("/training-pools")).json()
    [pool] = found["pools"]
    assert pool["pool_id"] == "default" and pool["capacity"]["cpu"] == 2
    assert (pool["executor"], pool["address"]) == ("local", None)  # what runs the pool
    assert pool["used"]["cpu"] == 1 and pool["free"]["cpu"] == 1
    [project] = pool["projects"]
    assert project["project_id"] == live.project_id
    assert project["limits"] == {"cpu": 2} and project["used"]["cpu"] == 1

    text = corral(live, "pools")
    assert text.exit_code == 0, text.output
    assert "1 CPU" in text.output and "2 CPU" in text.output
    assert "pool default (local): 1 node(s)" in text.output
    quota = corral(live, "quota", "--pool", "default", "--gpu", "1", "--borrowing")
    assert quota.exit_code == 0, quota.output
    shown = json.loads(corral(live, "quota", "--json").stdout)["quotas"]
    assert shown[0]["limits"] == {"gpu": 1} and shown[0]["borrowing"] is True
    bad = corral(live, "quota", "--pool", "nope", "--cpu", "1")
    assert bad.exit_code == 1 and "pool_id 'nope' does not exist" in bad.stderr


def test_the_queue_never_shows_a_project_another_projects_job_ids(live: conftest.Live) -> None:
    other = live.new_project("theirs")
    bob = live.new_user("bob", project_id=other, key=False)
    blocker = live.submit(factories.make_job(command="sleep 30", flavor_id="corral.cpu.full"))
    wait_running(live, blocker["metadata"]["id"])
    body = factories.make_job(name="their-secret", command="true", flavor_id="corral.cpu.full")
    body["spec"]["schedule_policy"] = {"priority": 3}
    r = bob.http.post(live.path("/training-jobs", other), json=body)
    assert r.status_code == 201, r.text
    theirs = r.json()["metadata"]["id"]
    mine = live.submit(factories.make_job(name="my-secret", command="true"))["metadata"]["id"]

    job = factories.wait_for(lambda: wait_code(j := live.job(mine)) == "behind_priority" and j,
                             what="mine to wait behind theirs")
    assert "a job of another project (priority 3)" in job["status"]["reason"]
    assert job["status"]["queue"]["jobs_ahead"] == 1
    seen = live.http.get(live.path("/training-queue")).json()
    assert [(j["id"], j["project_id"]) for j in seen["pools"][0]["jobs"]] == [
        (None, other), (mine, live.project_id)]
    assert theirs not in json.dumps(seen) and "their-secret" not in json.dumps(seen)
    assert theirs not in json.dumps(job)
    # The CLI names the other project where the user may know it, never by its id.
    table = corral(live, "queue").stdout
    assert "theirs" in table and other[:8] not in table
    theirs_seen = bob.http.get(live.path("/training-queue", other)).json()
    assert [(j["id"], j["reason"]) for j in theirs_seen["pools"][0]["jobs"]][1] == (
        None, "waiting behind higher priority")
    for secret in (mine, blocker["metadata"]["id"], "my-secret"):
        assert secret not in json.dumps(theirs_seen)


def test_npu_quotas_pools_queue_and_refusals(tmp_path: Any) -> None:
    live = conftest.start_live(tmp_path / "npu", cpus=2, accelerators={"npu": 2}, flavors=[
        {"flavor_id": "c1", "cpu": 1, "memory_gb": 1},
        {"flavor_id": "n1", "cpu": 1, "memory_gb": 1, "accelerators": {"npu": 1}},
        {"flavor_id": "t1", "cpu": 1, "memory_gb": 1, "accelerators": {"tpu": 1}}])
    try:
        for bad, words in (({"npu": -1}, "npu"), ({"gpu": 1}, "accelerator name 'gpu'"),
                           ({"npu": "x"}, "npu")):
            r = put(live, {"quotas": [{"pool_id": "default", "accelerators": bad}]})
            assert (r.status_code, r.json()["error_code"]) == (400, "ModelArts.2788"), r.text
            assert words in r.json()["error_msg"]
        r = put(live, {"quotas": [{"pool_id": "default", "accelerators": {"npu": 1}}]})
        assert r.json()["quotas"][0]["limits"] == {"accelerators": {"npu": 1}}
        cli = corral(live, "quota", "--pool", "default", "--accel", "npu=1", "--cpu", "2")
        assert cli.exit_code == 0, cli.output
        assert "2 CPU, 1 npu" in cli.output

        running = live.submit(factories.make_job(command="sleep 30", flavor_id="n1"))
        wait_running(live, running["metadata"]["id"])
        waiting = live.submit(factories.make_job(command="true", flavor_id="n1"))
        job = factories.wait_for(
            lambda: wait_code(j := live.job(waiting["metadata"]["id"])) == "quota_exceeded"
            and j, what="the second NPU job to wait for its quota")
        assert "npu quota of project" in job["status"]["reason"]
        assert "(over by 1)" in job["status"]["reason"]
        assert job["spec"]["resource"]["flavor_detail"]["flavor_info"]["npu"] == {
            "unit_num": "1", "product_name": "", "memory": ""}
        queue = live.http.get(live.path("/training-queue")).json()["pools"][0]["jobs"]
        assert "npu quota" in queue[0]["reason"]

        [pool] = live.http.get(live.path("/training-pools")).json()["pools"]
        assert pool["nodes"][0]["accelerators"] == {"npu": 2}
        assert pool["used"]["accelerators"] == {"npu": 1}
        assert pool["projects"][0]["limits"]["accelerators"] == {"npu": 1}
        assert "1 npu used of 2 CPU, " in corral(live, "pools").output.replace("\n", " ")

        r = live.http.post(live.path("/training-jobs"),
                           json=factories.make_job(command="true", flavor_id="t1"))
        assert (r.status_code, r.json()["error_code"]) == (400, "ModelArts.2763")
        assert "no node of pool 'default' has any tpu" in r.json()["error_msg"]
        info = live.http.get("/corral/info").json()
        assert info["nodes"][0]["accelerators"] == {"npu": 2}
        assert "1 npu" in corral(live, "flavors").output
    finally:
        stop_all(live)
        conftest.stop_live(live)
