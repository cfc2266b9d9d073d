"""The official ModelArts SDK, unchanged, drives algorithms: created, listed, shown,
changed and deleted with its own request models, and a job made from one that runs to
Completed and shows where it came from (each answer checked against the SDK model's field
types by `Sdk.call`)."""

from __future__ import annotations

import pathlib

import pytest
from huaweicloudsdkcore.exceptions import exceptions as sdk_errors
from huaweicloudsdkmodelarts.v1 import model as ma

from tests import conftest, factories
from tests.api import test_sdk

pytestmark = pytest.mark.filterwarnings(
    "error::huaweicloudsdkcore.warning.warning.SdkWarning")
sdk = test_sdk.sdk  # the SDK's fixture: stops what a test left running

TRAIN = """\
import pathlib, sys
args = dict(a[2:].split("=", 1) for a in sys.argv[1:])
pathlib.Path(args["train_url"], "args.txt").write_text(" ".join(sys.argv[1:]))
"""


def _algorithm(code: pathlib.Path, name: str, lr: str = "0.01") -> ma.Algorithm:
    return ma.Algorithm(
        metadata=ma.AlgorithmMetadata(name=name, description="made by the SDK"),
        job_config=ma.AlgorithmJobConfig(
            code_dir=str(code), boot_file="train.py",
            parameters=[
                ma.Parameters(name="lr", value=lr, description="learning rate",
                              constraint=ma.ParametersConstraint(
                                  type="Float", editable=True, required=True,
                                  valid_type="Range", valid_range=["0.0001", "1"])),
                ma.Parameters(name="epochs", value="2",
                              constraint=ma.ParametersConstraint(type="Integer"))],
            inputs=[ma.AlgorithmCreateInput(name="data_url", description="samples",
                                            remote_constraints=[
                                                ma.RemoteConstraint(data_type="obs")])],
            outputs=[ma.AlgorithmCreateOutput(name="train_url", description="model")],
            engine=ma.AlgorithmCreateEngine(engine_name="Python"),
            parameters_customization=True),
        resource_requirements=[ma.ResourceRequirement(key="flavor_type", values=["CPU"],
                                                      operator="in")])


def test_sdk_creates_lists_shows_changes_and_deletes_an_algorithm(
        sdk: test_sdk.Sdk, tmp_path: pathlib.Path) -> None:
    code = factories.write_code(tmp_path, TRAIN)
    made = sdk.call("create_algorithm",
                    ma.CreateAlgorithmRequest(body=_algorithm(code, "sdk-algo")))
    assert made.status_code == 201
    algo_id = made.metadata.id
    assert made.metadata.name == "sdk-algo" and made.metadata.create_time > 0
    assert made.job_config.parameters[0].constraint.valid_range == ["0.0001", "1"]
    assert made.resource_requirements[0].value == ["CPU"]

    listed = sdk.call("list_algorithms", ma.ListAlgorithmsRequest(
        offset=0, limit=10, sort_by="create_time", order="desc", searches="name:sdk-"))
    assert [a.metadata.id for a in listed.items] == [algo_id]
    assert (listed.count, listed.limit) == (1, 10)
    shown = sdk.call("show_algorithm_by_uuid",
                     ma.ShowAlgorithmByUuidRequest(algorithm_id=algo_id))
    assert (shown.metadata.name, shown.job_config.boot_file) == ("sdk-algo", "train.py")
    assert shown.job_config.inputs[0].name == "data_url"

    sdk.call("change_algorithm", ma.ChangeAlgorithmRequest(
        algorithm_id=algo_id, body=_algorithm(code, "sdk-algo-2", lr="0.5")))
    shown = sdk.call("show_algorithm_by_uuid",
                     ma.ShowAlgorithmByUuidRequest(algorithm_id=algo_id))
    assert (shown.metadata.name, shown.job_config.parameters[0].value) == ("sdk-algo-2", "0.5")

    sdk.call("delete_algorithm", ma.DeleteAlgorithmRequest(algorithm_id=algo_id))
    with pytest.raises(sdk_errors.ClientRequestException) as caught:
        sdk.client.show_algorithm_by_uuid(ma.ShowAlgorithmByUuidRequest(algorithm_id=algo_id))
    assert (caught.value.status_code, caught.value.error_code) == (404, "ModelArts.2775")


def test_sdk_runs_a_job_made_from_an_algorithm(sdk: test_sdk.Sdk, live_server: conftest.Live,
                                               tmp_path: pathlib.Path) -> None:
    code = factories.write_code(tmp_path, TRAIN)
    algo_id = sdk.call("create_algorithm", ma.CreateAlgorithmRequest(
        body=_algorithm(code, "sdk-runs"))).metadata.id
    data, out = tmp_path / "data", tmp_path / "out"
    data.mkdir()
    body = ma.Job(
        kind="job", metadata=ma.JobMetadata(name="from-algo"),
        algorithm=ma.JobAlgorithm(
            id=algo_id, parameters=[ma.Parameters(name="lr", value="0.2")],
            inputs=[ma.Input(name="data_url", remote=ma.InputDataInfo(
                obs=ma.InputDataInfoObs(obs_url=str(data))))],
            outputs=[ma.Output(name="train_url", remote=ma.Remote(
                obs=ma.RemoteObs(obs_url=str(out))))]),
        spec=ma.Spec(resource=ma.SpecResource(flavor_id="corral.cpu.1u", node_count=1)))
    created = test_sdk.create(sdk, body)
    assert (created.algorithm.id, created.algorithm.name) == (algo_id, "sdk-runs")

    done = sdk.wait(created.metadata.id, {"Completed", "Failed", "Abnormal"})
    assert done.status.phase == "Completed"
    assert (done.algorithm.id, done.algorithm.name) == (algo_id, "sdk-runs")
    assert done.algorithm.boot_file == "train.py"
    assert [(p.name, p.value) for p in done.algorithm.parameters] == [("lr", "0.2"),
                                                                        ("epochs", "2")]
    args = (out / "args.txt").read_text()
    assert "--lr=0.2" in args and "--epochs=2" in args

    body.metadata.name = "from-algo-bad"
    body.algorithm.parameters = [ma.Parameters(name="lr", value="5")]
    with pytest.raises(sdk_errors.ClientRequestException) as caught:
        test_sdk.create(sdk, body)
    assert (caught.value.status_code, caught.value.error_code) == (400, "ModelArts.2788")
    assert "outside [0.0001, 1]" in caught.value.error_msg
    found = live_server.http.post(live_server.path("/training-job-searches"), json={
        "filters": [{"key": "name", "value": ["from-algo-bad"]}]}).json()
    assert found["items"] == []
