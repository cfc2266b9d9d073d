"""Pure rules of issue 6: metric lines, the in-job API, deriving versions, registrations."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
from typing import Any

import pytest

from corral.domain import errors, metrics, models, specs, versions
from tests import factories

# --- what a job may print or write ------------------------------------------------------


def test_a_metrics_line_of_pairs_gives_points_at_its_step() -> None:
    points = metrics.parse_line("corral:metrics step=10 loss=0.31 accuracy=0.92\n")
    assert {(p.name, p.value, p.step) for p in points} == {
        ("loss", 0.31, 10), ("accuracy", 0.92, 10)}


def test_a_metrics_line_may_carry_json_and_nested_metrics() -> None:
    flat = metrics.parse_line('corral:metrics {"step": 3, "loss": 1.5}')
    nested = metrics.parse_line('corral:metrics {"step": 3, "time": 1700000000.5, '
                                '"metrics": {"loss": 1.5}}')
    assert [(p.name, p.value, p.step) for p in flat] == [("loss", 1.5, 3)]
    assert [(p.name, p.value, p.step, p.time_ms) for p in nested] == [
        ("loss", 1.5, 3, 1700000000500)]


@pytest.mark.parametrize("line", [
    "epoch 3 loss=0.2",  # no prefix
    "corral:metrics loss=abc",  # not a number
    "corral:metrics loss=nan",  # not finite
    'corral:metrics {"loss": true}',  # booleans are no numbers
    "corral:metrics {broken json",
    "corral:metrics bad name=1",  # 'bad' has no '=', 'name=1' is fine: see below
])
def test_lines_that_are_no_metrics_give_nothing_bad(line: str) -> None:
    points = metrics.parse_line(line)
    assert all(p.name == "name" for p in points)


def test_a_step_that_is_no_integer_is_left_out_but_the_values_kept() -> None:
    [p] = metrics.parse_line("corral:metrics step=1.5 loss=2")
    assert (p.step, p.value) == (None, 2.0)


def test_the_in_job_api_appends_json_lines_to_the_metrics_file(tmp_path: pathlib.Path) -> None:
    target = tmp_path / "m.jsonl"
    code = ("from corral import job\n"
            "job.log_metrics({'loss': 0.5}, step=1)\n"
            "job.log_metrics({'loss': 0.25, 'acc': 1}, step=2)\n")
    env = {"CORRAL_METRICS_FILE": str(target), "PATH": "/usr/bin:/bin"}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)
    lines = target.read_text().splitlines()
    got = [(p.name, p.value, p.step) for line in lines for p in metrics.parse_json(line)]
    assert got == [("loss", 0.5, 1), ("loss", 0.25, 2), ("acc", 1.0, 2)]


def test_the_in_job_api_prints_metrics_lines_outside_corral() -> None:
    code = "from corral import job; job.log_metrics({'loss': 2}, step=7)"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True, env={"PATH": "/usr/bin:/bin"}).stdout
    assert [(p.name, p.step) for p in metrics.parse_line(out)] == [("loss", 7)]


def test_the_in_job_api_refuses_what_is_no_number() -> None:
    from corral import job

    with pytest.raises(TypeError, match="not a number"):
        job.log_metrics({"loss": "high"})  # type: ignore[dict-item]


# --- versions ----------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "number"), [("V0003", 3), ("v3", 3), ("3", 3), (12, 12),
                                              ("V10000", 10000)])
def test_version_names_parse(text: str | int, number: int) -> None:
    assert versions.parse(text) == number
    assert versions.name(3) == "V0003"


@pytest.mark.parametrize("text", ["V0", "0", "x3", "-1", "V", ""])
def test_bad_version_names_are_refused(text: str) -> None:
    with pytest.raises(errors.BadParameter):
        versions.parse(text)


def _stored(**kw: Any) -> dict[str, Any]:
    body = factories.make_job(name="fam", code_dir="/code", boot_file="/code/sub/train.py",
                              parameters={"lr": "0.1", "epochs": "5"},
                              inputs={"data": "/data/a"}, outputs={"train_url": "/out/"},
                              **kw)
    spec = specs.JobCreate.model_validate(body)
    spec.algorithm.outputs[0].local_dir = "/out"
    return json.loads(spec.model_dump_json(exclude_none=True))


def test_a_version_merges_parameters_inputs_and_environment_by_name() -> None:
    changes = versions.VersionCreate.model_validate({
        "algorithm": {"parameters": [{"name": "lr", "value": 0.01}, {"name": "seed", "value": 3}],
                      "inputs": [{"name": "data", "remote": {"obs": {"obs_url": "/data/b"}}}],
                      "environments": {"A": 1}},
        "remove_parameters": ["epochs"]})
    body, _ = versions.derive(_stored(), changes, 2, {})
    alg = body["algorithm"]
    assert [(p["name"], p["value"]) for p in alg["parameters"]] == [("lr", "0.01"),
                                                                  ("seed", "3")]
    assert alg["inputs"][0]["remote"]["obs"]["obs_url"] == "/data/b"
    assert alg["environments"] == {"A": "1"}
    assert "local_dir" not in alg["outputs"][0]


def test_a_version_writes_under_the_first_versions_output_unless_told() -> None:
    same, bases = versions.derive(_stored(), versions.VersionCreate(), 3, {"train_url": "/out/"})
    assert same["algorithm"]["outputs"][0]["remote"]["obs"]["obs_url"] == "/out/V0003"
    assert bases == {"train_url": "/out/"}
    told = versions.VersionCreate.model_validate({"algorithm": {"outputs": [
        {"name": "train_url", "remote": {"obs": {"obs_url": "s3://b/elsewhere"}}}]}})
    moved, bases = versions.derive(_stored(), told, 3, {"train_url": "/out/"})
    assert moved["algorithm"]["outputs"][0]["remote"]["obs"]["obs_url"] == "s3://b/elsewhere"
    assert bases == {"train_url": "s3://b/elsewhere"}


def test_a_new_code_dir_keeps_the_boot_file_where_it_was_in_the_old_one() -> None:
    changes = versions.VersionCreate.model_validate({"algorithm": {"code_dir": "/code2"}})
    body, _ = versions.derive(_stored(), changes, 2, {})
    assert body["algorithm"]["boot_file"] == "/code2/sub/train.py"


def test_resuming_says_from_which_version_and_the_next_version_forgets_it() -> None:
    resumed, _ = versions.derive(_stored(), versions.VersionCreate(resume=True), 2, {},
                                 parent_number=1)
    assert resumed["algorithm"]["environments"][versions.RESUME_ENV] == "V0001"
    again, _ = versions.derive(resumed, versions.VersionCreate(), 3, {})
    assert versions.RESUME_ENV not in again["algorithm"]["environments"]


def test_removing_a_parameter_that_is_not_there_is_refused() -> None:
    with pytest.raises(errors.BadParameter, match="nope"):
        versions.derive(_stored(), versions.VersionCreate(remove_parameters=["nope"]), 2, {})


# --- model registration --------------------------------------------------------------------


def _job(**ann: str) -> specs.JobCreate:
    body = factories.make_job(name="trainer", command="true",
                              outputs={"ckpt": "/o/c", "train_url": "/o/t"})
    body["metadata"]["annotations"] = ann
    return specs.JobCreate.model_validate(body)


def test_a_completed_job_registers_its_train_url_under_its_name_by_default() -> None:
    reg = models.registration(_job(), "train_url")
    assert reg == models.Registration(model="trainer", channel="train_url", when="on-success")
    assert reg.wanted("Completed") and not reg.wanted("Failed")


def test_annotations_choose_model_channel_and_when() -> None:
    reg = models.registration(_job(**{"corral/model-name": "m", "corral/model-channel": "ckpt",
                                      "corral/register-model": "always"}), "train_url")
    assert reg == models.Registration(model="m", channel="ckpt", when="always")
    assert reg.wanted("Failed")
    assert models.registration(_job(**{"corral/register-model": "never"}), "train_url") is None


@pytest.mark.parametrize(("ann", "says"), [
    ({"corral/register-model": "sometimes"}, "register-model"),
    ({"corral/model-name": "bad name"}, "model-name"),
    ({"corral/model-channel": "nope"}, "no output channel 'nope'"),
])
def test_bad_registration_annotations_are_refused(ann: dict[str, str], says: str) -> None:
    with pytest.raises(errors.BadParameter, match=says):
        models.registration(_job(**ann), "train_url")


def test_inference_jobs_need_a_model_and_register_nothing() -> None:
    body = factories.make_job(command="true", outputs={"train_url": "/o"})
    body["kind"] = "inference"
    with pytest.raises(errors.BadParameter, match="needs `model`"):
        specs.parse(specs.JobCreate, body)
    body["model"] = {"name": "m", "alias": "production"}
    spec = specs.parse(specs.JobCreate, body)
    assert models.registration(spec, "train_url") is None
    body["model"] = {"name": "m", "alias": "production", "version": 2}
    with pytest.raises(errors.BadParameter, match="not both"):
        specs.parse(specs.JobCreate, body)


@pytest.mark.parametrize("alias", ["production", "candidate", "a-b_1"])
def test_aliases(alias: str) -> None:
    assert models.check_alias(alias) == alias


@pytest.mark.parametrize("alias", ["latest", "1", "-x", "a b", "x" * 65])
def test_bad_aliases(alias: str) -> None:
    with pytest.raises(errors.BadParameter):
        models.check_alias(alias)


# --- object storage settings -----------------------------------------------------------


def test_each_project_may_have_its_own_object_store(tmp_path: pathlib.Path) -> None:
    from corral import settings
    from corral.storage import objects

    shared = settings.S3Config(endpoint_url="http://shared")
    own = settings.S3Config(endpoint_url="http://own")
    s = settings.Settings(home=tmp_path, s3=shared, project_s3={"p1": own})
    assert s.s3_for("p1") is own and s.s3_for("p2") is shared
    bare = objects.Stores(settings.Settings(home=tmp_path))
    with pytest.raises(errors.BadParameter, match="not configured"):
        bare.require("s3://b/k", "input 'x'", "p1")
    with pytest.raises(errors.BadParameter, match=r"'\.\.' are not allowed"):
        objects.Stores(s).require("s3://b/a/../k", "input 'x'", "p1")
    with pytest.raises(errors.BadParameter, match="bucket"):
        objects.bucket_key("s3:///k")
    assert objects.bucket_key("obs://b/k/") == "b/k"
    assert objects.join("s3://b/k/", "V0002") == "s3://b/k/V0002"
