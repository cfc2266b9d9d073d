"""Algorithms over real HTTP: the five calls in the reference's shapes, a job made from one
(its defaults, the job's overrides within the constraints, its channels, the algorithm it
came from), bad input refused with nothing changed, roles, and a deleted algorithm's jobs
kept whole."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator
from typing import Any

import pytest

from tests import conftest, factories

TRAIN = """\
import pathlib, sys
args = dict(a[2:].split("=", 1) for a in sys.argv[1:])
print("ARGS", sorted(args.items()), flush=True)
pathlib.Path(args["train_url"], "seen.txt").write_text(" ".join(sys.argv[1:]))
"""


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[conftest.Live]:
    server = conftest.start_live(tmp_path_factory.mktemp("algorithms") / "home")
    yield server
    conftest.stop_live(server)


@pytest.fixture(scope="module")
def code(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    return factories.write_code(tmp_path_factory.mktemp("code"), TRAIN)


def algorithm_body(code: pathlib.Path, name: str, **job_config: Any) -> dict[str, Any]:
    """A create body: lr (Float in [0.0001, 1], default 0.01), epochs (Integer, required,
    default 3), mode (fixed: not editable), a `data` input and a `train_url` output."""
    cfg: dict[str, Any] = {
        "code_dir": str(code), "boot_file": "train.py",
        "parameters": [
            {"name": "lr", "value": "0.01", "description": "learning rate",
             "constraint": {"type": "Float", "editable": True, "required": False,
                            "valid_type": "Range", "valid_range": ["0.0001", "1"]}},
            {"name": "epochs", "value": "3",
             "constraint": {"type": "Integer", "required": True, "valid_type": "None"}},
            {"name": "mode", "value": "fast",
             "constraint": {"type": "String", "editable": False,
                            "valid_type": "Enumeration", "valid_range": ["fast", "slow"]}},
        ],
        "inputs": [{"name": "data", "description": "the samples",
                    "remote_constraints": [{"data_type": "obs"}]}],
        "outputs": [{"name": "train_url", "description": "the model"}],
        "engine": {"engine_name": "Python"},
    }
    cfg.update(job_config)
    return {"metadata": {"name": name, "description": "a test algorithm"}, "job_config": cfg,
            "resource_requirements": [{"key": "flavor_type", "values": ["CPU"],
                                       "operator": "in"}]}


def create(live: conftest.Live, body: dict[str, Any], project_id: str | None = None,
           http: Any = None) -> dict[str, Any]:
    r = (http or live.http).post(live.path("/algorithms", project_id), json=body)
    assert r.status_code == 201, r.text
    return dict(r.json())


def listed(live: conftest.Live, **params: Any) -> dict[str, Any]:
    r = live.http.get(live.path("/algorithms"), params=params)
    assert r.status_code == 200, r.text
    return dict(r.json())


def job_of(algorithm_id: str, out: pathlib.Path, data: pathlib.Path,
           **alg: Any) -> dict[str, Any]:
    body = factories.make_job()
    body["algorithm"] = {
        "id": algorithm_id,
        "inputs": [{"name": "data", "remote": {"obs": {"obs_url": str(data)}}}],
        "outputs": [{"name": "train_url", "remote": {"obs": {"obs_url": str(out)}}}],
        **alg}
    return body


def refused(live: conftest.Live, path: str, body: dict[str, Any], code: str = "ModelArts.2788",
            status: int = 400, method: str = "POST") -> str:
    r = live.http.request(method, live.path(path), json=body)
    assert (r.status_code, r.json()["error_code"]) == (status, code), r.text
    return str(r.json()["error_msg"])


def job_count(live: conftest.Live) -> int:
    r = live.http.post(live.path("/training-job-searches"), json={})
    return int(r.json()["total"])


# --- the five calls ---------------------------------------------------------------------------


def test_create_show_list_modify_and_delete(live: conftest.Live, code: pathlib.Path) -> None:
    made = create(live, algorithm_body(code, "crud-a"))
    algo_id = made["metadata"]["id"]
    assert made["metadata"]["name"] == "crud-a"
    assert made["metadata"]["description"] == "a test algorithm"
    assert made["metadata"]["user_name"] == "admin"
    assert made["metadata"]["create_time"] > 0 and made["metadata"]["is_valid"] is True
    assert made["job_config"]["boot_file"] == "train.py"
    assert [p["name"] for p in made["job_config"]["parameters"]] == ["lr", "epochs", "mode"]
    assert made["job_config"]["parameters"][0]["constraint"]["valid_range"] == ["0.0001", "1"]
    assert made["resource_requirements"] == [
        {"key": "flavor_type", "value": ["CPU"], "operator": "in"}]

    shown = live.http.get(live.path(f"/algorithms/{algo_id}")).json()
    assert shown == made
    for name in ("crud-b", "crud-c"):
        create(live, algorithm_body(code, name))
    page = listed(live, limit=2, offset=1, sort_by="name", order="asc", searches="name:CRUD")
    assert (page["count"], page["limit"], page["offset"]) == (3, 2, 1)
    assert page["total"] >= 3
    assert [a["metadata"]["name"] for a in page["items"]] == ["crud-b", "crud-c"]
    assert [a["metadata"]["name"] for a in listed(live, searches="crud-",
                                                  limit=50)["items"]][:3] == [
        "crud-c", "crud-b", "crud-a"]  # newest first
    assert listed(live, workspace_id="7")["items"] == []

    changed = made | {"metadata": {"name": "crud-renamed", "description": "changed"}}
    changed["job_config"]["parameters"][0]["value"] = "0.5"
    r = live.http.put(live.path(f"/algorithms/{algo_id}"), json=changed)
    assert r.status_code == 200, r.text
    again = live.http.get(live.path(f"/algorithms/{algo_id}")).json()
    assert again["metadata"]["name"] == "crud-renamed"
    assert again["metadata"]["description"] == "changed"
    assert again["job_config"]["parameters"][0]["value"] == "0.5"
    assert again["metadata"]["create_time"] == made["metadata"]["create_time"]

    r = live.http.delete(live.path(f"/algorithms/{algo_id}"))
    assert r.status_code == 200, r.text
    r = live.http.get(live.path(f"/algorithms/{algo_id}"))
    assert (r.status_code, r.json()["error_code"]) == (404, "ModelArts.2775")
    assert "crud-renamed" not in [a["metadata"]["name"] for a in
                                  listed(live, limit=50)["items"]]


@pytest.mark.parametrize(("change", "says"), [
    ({"code_dir": None}, "code_dir and job_config.boot_file go together"),
    ({"boot_file": "missing.py"}, "does not exist"),
    ({"engine": {"engine_id": "no-such-engine"}}, "engine 'no-such-engine' does not exist"),
    ({"parameters": [{"name": "lr", "value": "7", "constraint": {
        "valid_type": "Range", "valid_range": ["0", "1"]}}]}, "outside [0, 1]"),
    ({"parameters": [{"name": "n", "value": "x", "constraint": {"type": "Integer"}}]},
     "is not an Integer"),
    ({"parameters": [{"name": "n", "constraint": {"type": "Complex"}}]}, "not one of"),
    ({"outputs": [{"name": "data"}]}, "duplicate channel names: data"),
    ({"engine": {"image_url": "swr.example.com/t:1"}}, "needs container_runtime = 'podman'"),
])
def test_a_bad_algorithm_is_refused_and_nothing_is_saved(
        live: conftest.Live, code: pathlib.Path, change: dict[str, Any], says: str) -> None:
    before = listed(live)["total"]
    body = algorithm_body(code, "bad-one")
    body["job_config"].update(change)
    assert says in refused(live, "/algorithms", body)
    assert listed(live)["total"] == before


def test_a_duplicate_name_is_refused_and_changes_nothing(live: conftest.Live,
                                                         code: pathlib.Path) -> None:
    first = create(live, algorithm_body(code, "dup-a"))
    other = create(live, algorithm_body(code, "dup-b"))
    before = listed(live)["total"]
    assert "already exists" in refused(live, "/algorithms", algorithm_body(code, "dup-a"),
                                       code="ModelArts.2751")
    renamed = algorithm_body(code, "dup-a")
    refused(live, f"/algorithms/{other['metadata']['id']}", renamed, code="ModelArts.2751",
            method="PUT")
    assert listed(live)["total"] == before
    shown = live.http.get(live.path(f"/algorithms/{other['metadata']['id']}")).json()
    assert shown["metadata"]["name"] == "dup-b"
    assert first["metadata"]["id"] != other["metadata"]["id"]


# --- a job made from an algorithm -------------------------------------------------------------


def test_a_job_from_an_algorithm_runs_with_its_defaults_and_survives_its_deletion(
        live: conftest.Live, code: pathlib.Path, tmp_path: pathlib.Path) -> None:
    algo = create(live, algorithm_body(code, "runs"))
    algo_id = algo["metadata"]["id"]
    data, out = tmp_path / "data", tmp_path / "out"
    data.mkdir()
    body = job_of(algo_id, out, data, parameters=[{"name": "lr", "value": "0.2"},
                                                  {"name": "extra", "value": "1"}])
    job = live.submit(body)

    alg = job["algorithm"]
    assert (alg["id"], alg["name"]) == (algo_id, "runs")
    assert (alg["code_dir"], alg["boot_file"]) == (str(code), "train.py")
    assert alg["engine"]["engine_name"] == "Python"
    assert [(p["name"], p["value"]) for p in alg["parameters"]] == [
        ("lr", "0.2"), ("epochs", "3"), ("mode", "fast"), ("extra", "1")]
    assert alg["inputs"][0]["description"] == "the samples"
    done = live.wait(job["metadata"]["id"])
    assert done["status"]["phase"] == "Completed", done["status"]
    seen = (out / "seen.txt").read_text()
    for arg in ("--lr=0.2", "--epochs=3", "--mode=fast", "--extra=1", f"--data={data}"):
        assert arg in seen
    r = live.http.get(live.path(f"/training-jobs/{job['metadata']['id']}/events"))
    assert any("from algorithm runs" in e["message"] for e in r.json()["events"])

    # Deleting the algorithm keeps the job, which a new version runs again as it was.
    assert live.http.delete(live.path(f"/algorithms/{algo_id}")).status_code == 200
    kept = live.job(job["metadata"]["id"])
    assert (kept["algorithm"]["id"], kept["algorithm"]["name"]) == (algo_id, "runs")
    r = live.http.post(live.path(f"/training-jobs/{job['metadata']['id']}/versions"),
                       json={"parameters": [{"name": "epochs", "value": "4"}]})
    assert r.status_code == 201, r.text
    assert live.wait(r.json()["metadata"]["id"])["status"]["phase"] == "Completed"
    assert (r.json()["algorithm"]["id"], r.json()["algorithm"]["name"]) == (algo_id, "runs")


@pytest.mark.parametrize(("change", "says"), [
    ({"parameters": [{"name": "lr", "value": "3"}]}, "'lr' of algorithm 'strict': 3 is "
     "outside [0.0001, 1]"),
    ({"parameters": [{"name": "lr", "value": "fast"}]}, "is not a Float"),
    ({"parameters": [{"name": "epochs", "value": ""}]}, "'epochs' of algorithm 'strict' is "
     "required"),
    ({"parameters": [{"name": "mode", "value": "slow"}]}, "is not editable"),
    ({"parameters": [{"name": "other", "value": "1"}]}, "parameters_customization is false"),
    ({"code_dir": "/tmp", "boot_file": "x.py"}, "takes its code, boot file"),
    ({"engine": {"engine_name": "Python"}}, "algorithm.engine"),
    ({"inputs": []}, "input 'data' of algorithm 'strict': give its data"),
    ({"outputs": [{"name": "logs", "remote": {"obs": {"obs_url": "/tmp/x"}}}]},
     "output 'logs': algorithm 'strict' has no such output channel (it has train_url)"),
    ({"id": "0f0f0f0f-no-such-algorithm"}, "algorithm '0f0f0f0f-no-such-algorithm' does not "
     "exist in this project"),
])
def test_a_bad_job_from_an_algorithm_is_refused_and_nothing_is_made(
        live: conftest.Live, code: pathlib.Path, tmp_path: pathlib.Path,
        change: dict[str, Any], says: str) -> None:
    found = [a for a in listed(live, searches="strict")["items"]
             if a["metadata"]["name"] == "strict"]
    algo = found[0] if found else create(live, algorithm_body(
        code, "strict", parameters_customization=False))
    before = job_count(live)
    body = job_of(algo["metadata"]["id"], tmp_path / "out", tmp_path)
    body["algorithm"].update(change)
    assert says in refused(live, "/training-jobs", body)
    assert job_count(live) == before


def test_the_algorithms_resource_requirements_hold(live: conftest.Live, code: pathlib.Path,
                                                    tmp_path: pathlib.Path) -> None:
    body = algorithm_body(code, "one-node")
    body["resource_requirements"] = [{"key": "host_distributed_mode", "values": ["singular"]}]
    algo = create(live, body)
    job = job_of(algo["metadata"]["id"], tmp_path / "out", tmp_path)
    job["spec"]["resource"]["node_count"] = 2
    assert "host_distributed_mode in singular" in refused(live, "/training-jobs", job)


def test_another_projects_algorithm_is_not_found(live: conftest.Live, code: pathlib.Path,
                                                 tmp_path: pathlib.Path) -> None:
    other = live.new_project("algo-other")
    # (a command: the other project may not read the code folder of this one)
    theirs = create(live, algorithm_body(code, "theirs", code_dir=None, boot_file=None,
                                         command="true"), project_id=other)
    algo_id = theirs["metadata"]["id"]
    r = live.http.get(live.path(f"/algorithms/{algo_id}"))
    assert (r.status_code, r.json()["error_code"]) == (404, "ModelArts.2775")
    assert "does not exist" in refused(live, "/training-jobs",
                                       job_of(algo_id, tmp_path / "out", tmp_path))
    # The same name is free in another project.
    create(live, algorithm_body(code, "theirs"))


def test_viewers_read_members_write_their_own(live: conftest.Live, code: pathlib.Path) -> None:
    viewer = live.new_user("algo-viewer", "viewer", key=False)
    member = live.new_user("algo-member", "member", key=False)
    mine = create(live, algorithm_body(code, "admins"))
    r = viewer.http.get(live.path(f"/algorithms/{mine['metadata']['id']}"))
    assert r.status_code == 200, r.text
    assert viewer.http.get(live.path("/algorithms")).status_code == 200
    r = viewer.http.post(live.path("/algorithms"), json=algorithm_body(code, "viewers"))
    assert (r.status_code, r.json()["error_code"]) == (403, "ModelArts.0403")
    theirs = create(live, algorithm_body(code, "members"), http=member.http)
    assert theirs["metadata"]["user_name"] == "algo-member"
    r = member.http.delete(live.path(f"/algorithms/{mine['metadata']['id']}"))
    assert (r.status_code, r.json()["error_code"]) == (403, "ModelArts.0403")
    assert "belongs to admin" in r.json()["error_msg"]
    assert member.http.delete(
        live.path(f"/algorithms/{theirs['metadata']['id']}")).status_code == 200
