"""The datasets and incremental-learning-jobs API on a live server, on SQLite and
PostgreSQL: bodies in JSON and YAML, errors in the ModelArts format, who may do what, and
one project's loops and datasets invisible to another's members."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest
import yaml

from tests import conftest, factories
from tests.integration import il_live

pytestmark = pytest.mark.slow


@pytest.fixture
def live(tmp_path: pathlib.Path, db_url: str) -> Iterator[conftest.Live]:
    server = conftest.start_live(tmp_path / "home", cpus=4, storage_interval=0.2,
                                 database_url=db_url)
    yield server
    conftest.stop_live(server)


@pytest.fixture
def il(live: conftest.Live, tmp_path: pathlib.Path) -> il_live.IL:
    world = il_live.IL(live.http, live.project_id, tmp_path / "work")
    world.initial_model("m", accuracy=0.5)
    world.dataset("stream", ["1", "2"])
    return world


def test_a_dataset_is_made_counted_appended_to_and_deleted(il: il_live.IL) -> None:
    shown = il.ok("GET", "/datasets/stream")
    assert (shown["number_of_samples"], shown["format"]) == (2, "txt")
    assert il.append(["3", "4", "5"]) == {"appended": 3, "number_of_samples": 5}
    with (il.root / "stream.txt").open("a") as fh:
        fh.write("6\n")  # by hand: counted when next shown
    assert il.ok("GET", f"/datasets/{shown['id']}")["number_of_samples"] == 6
    sedna = il.root / "other.csv"
    sedna.write_text("x,y\n1,2\n")
    made = il.ok("POST", "/datasets", 201, json={
        "metadata": {"name": "other"}, "spec": {"url": str(sedna), "format": "csv"}})
    assert (made["number_of_samples"], made["format"]) == (1, "csv")
    assert [d["name"] for d in il.ok("GET", "/datasets")["datasets"]] == ["other", "stream"]
    il.ok("DELETE", "/datasets/other")
    assert sedna.exists()
    missing = il.http.get(il.path("/datasets/other"))
    assert missing.status_code == 404 and missing.json()["error_code"] == "ModelArts.2775"


@pytest.mark.parametrize(("body", "words"), [
    ({"name": "x", "url": "/nonexistent/data.txt"}, "does not exist"),
    ({"name": "x", "url": "relative.txt"}, "absolute"),
    ({"name": "bad name", "url": "/tmp"}, "dataset names"),
    ({"name": "x", "url": "/tmp/x.txt", "format": "parquet"}, "format"),
])
def test_a_dataset_that_cannot_work_is_refused(il: il_live.IL, body: dict[str, str],
                                               words: str) -> None:
    r = il.http.post(il.path("/datasets"), json=body)
    assert r.status_code == 400 and words in r.json()["error_msg"], r.text


def test_samples_are_lines(il: il_live.IL) -> None:
    r = il.http.post(il.path("/datasets/stream/samples"), json={"samples": ["a\nb"]})
    assert r.status_code == 400 and r.json()["error_code"] == "ModelArts.2788"


def test_a_loop_is_made_from_yaml_and_shows_sednas_conditions(il: il_live.IL) -> None:
    body = {"apiVersion": "sedna.io/v1alpha1", "kind": "IncrementalLearningJob",
            "metadata": {"name": "from-yaml"}, "spec": il.spec(samples=100)}
    r = il.http.post(il.path("/incremental-learning-jobs"), content=yaml.safe_dump(body),
                     headers={"Content-Type": "application/yaml"})
    assert r.status_code == 201, r.text
    made = r.json()
    assert made["kind"] == "IncrementalLearningJob"
    assert made["spec"]["trainSpec"]["trigger"]["condition"]["threshold"] == 100
    status = il.show("from-yaml")["status"]
    assert status["state"] == "Waiting" and status["model"]["name"] == "m"
    waiting = status["conditions"][-1]
    assert (waiting["stage"], waiting["type"]) == ("Train", "Waiting")
    assert "num_of_samples >= 100" in waiting["message"]
    listed = il.ok("GET", "/incremental-learning-jobs")
    assert listed["total"] == 1 and listed["items"][0]["status"]["rounds"] == []
    events = il.ok("GET", "/incremental-learning-jobs/from-yaml/events")
    assert events["events"][0]["message"].startswith("Created by admin")


@pytest.mark.parametrize(("change", "status", "words"), [
    ({"dataset": {"name": "nope"}}, 400, "dataset 'nope' does not exist"),
    ({"initialModel": {"name": "nope"}}, 400, "model 'nope' does not exist"),
    ({"outputDir": "s3://bucket/out"}, 400, "object storage is not configured"),
    ({"trainSpec": {"template": {"algorithm": {"command": "true"}}, "trigger": {
        "condition": {"operator": ">", "threshold": 1, "metric": "accuracy"}}}}, 400,
     "num_of_samples"),
    ({"evalSpec": {"template": {"algorithm": {"command": "true"},
                                "spec": {"resource": {"flavor_id": "nope"}}}}}, 400, "nope"),
])
def test_a_loop_that_cannot_work_is_refused_with_a_modelarts_error(
        il: il_live.IL, change: dict[str, object], status: int, words: str) -> None:
    r = il.http.post(il.path("/incremental-learning-jobs"),
                     json={"metadata": {"name": "bad"}, "spec": {**il.spec(), **change}})
    assert r.status_code == status, r.text
    assert words in r.json()["error_msg"]


@pytest.mark.parametrize("stage", ["trainSpec", "evalSpec", "deploySpec"])
def test_a_template_whose_code_is_not_there_is_refused_and_nothing_is_made(
        il: il_live.IL, stage: str) -> None:
    spec = il.spec()
    spec[stage]["template"] = {**spec[stage]["template"], "algorithm": {
        "code_dir": str(il.root / "gone"), "boot_file": "train.py"}}
    r = il.http.post(il.path("/incremental-learning-jobs"),
                     json={"metadata": {"name": "bad"}, "spec": spec})
    assert r.status_code == 400, r.text
    assert r.json() == {"error_code": "ModelArts.2788", "error_msg": (
        f"spec: a template cannot make a job: algorithm.code_dir '{il.root / 'gone'}' is "
        "not a directory")}
    assert il.ok("GET", "/incremental-learning-jobs")["total"] == 0
    assert il.ok("POST", "/training-job-searches", json={})["total"] == 1  # the model's
    assert not (il.root / "out").exists()


def test_sednas_node_name_pins_the_service_to_a_node_of_its_pool_or_is_refused(
        il: il_live.IL) -> None:
    def create(spec: dict[str, object]) -> tuple[int, str]:
        r = il.http.post(il.path("/incremental-learning-jobs"),
                         json={"metadata": {"name": "pinned"}, "spec": spec})
        return r.status_code, r.json().get("error_msg", "")

    spec = il.spec(samples=100)
    serve = spec["deploySpec"]["template"]
    serve["spec"]["nodeName"] = "edge-9"
    assert create(spec) == (400, "spec: a template cannot make a job: "
                            "spec.resource.node_name: pool 'default' has no node 'edge-9' "
                            "(its nodes: local)")
    assert il.ok("GET", "/incremental-learning-jobs")["total"] == 0
    serve["spec"]["nodeName"] = "local"  # this machine's one node
    assert create(spec)[0] == 201
    job = factories.wait_for(lambda: il.show("pinned")["status"]["service"], timeout=30,
                             what="the service job")
    shown = il.ok("GET", f"/training-jobs/{job['job_id']}")
    assert shown["spec"]["resource"]["node_name"] == "local"


def test_actions_the_state_does_not_allow_are_409s(il: il_live.IL) -> None:
    il.create(il.spec(serve=False, samples=100))
    r = il.http.post(il.path("/incremental-learning-jobs/loop/actions"),
                     json={"action": "resume"})
    assert r.status_code == 409 and r.json()["error_code"] == "ModelArts.2796"
    assert il.act("promote", status=400, reason="")["error_msg"] == (
        "a forced promotion needs a reason")
    assert "no round has trained a model yet" in il.act("promote", status=409,
                                                        reason="x")["error_msg"]
    assert "no earlier version" in il.act("rollback", status=409)["error_msg"]
    il.act("stop")
    assert il.show()["status"]["state"] == "Stopped"
    il.ok("DELETE", "/incremental-learning-jobs/loop", 202)
    assert il.http.get(il.path("/incremental-learning-jobs/loop")).status_code == 404
    assert il.http.get(il.path("/models/m")).status_code == 200  # its models stay


def test_one_projects_loops_and_datasets_are_invisible_to_another(
        live: conftest.Live, il: il_live.IL) -> None:
    il.create(il.spec(serve=False, samples=100))
    other = live.new_project("other")
    eve = live.new_user("eve", "admin", other)
    outsider = il_live.IL(eve.http, other, live.settings.home / "projects" / other / "work")
    for path in ("/datasets/stream", "/incremental-learning-jobs/loop"):
        assert outsider.http.get(outsider.path(path)).status_code == 404
        # ... and through the other project's path, with eve's credential: not hers
        r = eve.http.get(il.path(path))
        assert r.status_code == 404 and r.json()["error_code"] == "ModelArts.2786"
    assert outsider.ok("GET", "/incremental-learning-jobs")["total"] == 0
    assert outsider.ok("GET", "/datasets")["total"] == 0
    # A loop of hers cannot name the first project's dataset or model.
    outsider.initial_model("m")
    r = eve.http.post(outsider.path("/incremental-learning-jobs"), json={
        "metadata": {"name": "loop"}, "spec": outsider.spec()})
    assert r.status_code == 400 and "dataset 'stream' does not exist" in r.json()["error_msg"]
    viewer = live.new_user("vic", "viewer")
    r = viewer.http.post(il.path("/incremental-learning-jobs/loop/actions"),
                         json={"action": "trigger"})
    assert r.status_code == 403


def test_the_cli_makes_and_shows_a_loop_from_a_file_with_relative_paths(
        live: conftest.Live, il: il_live.IL, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.api.test_cli import assert_one_error_line, corral

    monkeypatch.chdir(il.root)
    made = corral(live, "datasets", "create", "fresh", "fresh.txt", "--empty")
    assert made.exit_code == 0 and "dataset fresh: 0 sample(s)" in made.output, made.output
    appended = corral(live, "datasets", "append", "fresh", "0.9", "0.9", "0.9", "0.9")
    assert "fresh has 4 sample(s)" in appended.output
    spec = il.spec(serve=False, dataset={"name": "fresh", "trainProb": 0.5},
                   outputDir="out-cli")
    for key in ("trainSpec", "evalSpec"):
        spec[key]["template"]["algorithm"]["code_dir"] = "code"  # relative to the file
    (il.root / "loop.yaml").write_text(yaml.safe_dump({"metadata": {"name": "cli-loop"},
                                                       "spec": spec}))
    created = corral(live, "il", "create", "-f", "loop.yaml")
    assert created.exit_code == 0 and "created cli-loop" in created.output, created.output
    il.wait_round(1, {"Promoted"}, name="cli-loop")
    shown = corral(live, "il", "show", "cli-loop")
    assert shown.exit_code == 0, shown.output
    for words in ("cli-loop", "m:production = v2", "ROUND", "accuracy 0.9 vs 0.5",
                  "Promoted (accuracy_delta > 0: 0.4 holds)", "m v2 Loaded"):
        assert words in shown.output, shown.output
    listed = corral(live, "il", "list")
    assert "cli-loop" in listed.output and "m:production=v2" in listed.output
    assert corral(live, "il", "promote", "cli-loop", "--reason", "back to 1",
                  "--version", "1").exit_code == 0
    il.wait_state("Waiting", name="cli-loop")
    assert il.alias()["version"] == 1
    spec["trainSpec"]["template"]["spec"] = {"resource": {"flavour_id": "x"}}
    (il.root / "bad.yaml").write_text(yaml.safe_dump({"metadata": {"name": "bad"},
                                                      "spec": spec}))
    assert_one_error_line(corral(live, "il", "create", "-f", "bad.yaml"),
                          "bad.yaml: spec.trainSpec.template: unknown key(s) "
                          "spec.resource.flavour_id (did you mean flavor_id?)")
