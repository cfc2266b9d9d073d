"""The official ModelArts SDK, unchanged, drives a hyperparameter search: created with its
own `AutoSearch` models, its life cycle, and the eight search calls (each answer checked
against the SDK model's field types by `Sdk.call`)."""

from __future__ import annotations

import pathlib

import pytest
from huaweicloudsdkcore.exceptions import exceptions as sdk_errors
from huaweicloudsdkmodelarts.v1 import model as ma

from tests import conftest
from tests.api import test_sdk
from tests.integration import search_rig as rig

pytestmark = pytest.mark.filterwarnings(
    "error::huaweicloudsdkcore.warning.warning.SdkWarning")
sdk = test_sdk.sdk  # the SDK's fixture: stops what a test left running


def _auto_search(samples: int) -> ma.AutoSearch:
    return ma.AutoSearch(
        reward_attrs=[ma.RewardAttrs(name="accuracy", mode="max",
                                     regex=r"accuracy=([0-9.]+);")],
        search_params=[
            ma.SearchParams(name="lr", param_type="continuous", lower_bound="0.0001",
                            upper_bound="0.1"),
            ma.SearchParams(name="width", param_type="discrete",
                            discrete_values=["8", "16", "32"])],
        algo_configs=[ma.AlgoConfigs(name="tpe_search", params=[
            ma.AutoSearchAlgoConfigParameter(key="num_samples", value=str(samples),
                                             type="int"),
            ma.AutoSearchAlgoConfigParameter(key="max_concurrent", value="2", type="int")])])


def _create(sdk: test_sdk.Sdk, code: pathlib.Path, name: str, samples: int,
            steps: int) -> str:
    body = test_sdk.sdk_job(name, code_dir=code, parameters=[
        ma.Parameter(name="steps", value=str(steps))])
    body.algorithm.policies = ma.JobPolicies(auto_search=_auto_search(samples))
    made = sdk.call("create_training_job", ma.CreateTrainingJobRequest(body=body))
    return str(made.metadata.id)


def test_sdk_runs_a_search_and_reads_its_trials(sdk: test_sdk.Sdk,
                                                live_server: conftest.Live,
                                                tmp_path: pathlib.Path) -> None:
    algos = sdk.call("show_search_algorithms", ma.ShowSearchAlgorithmsRequest())
    assert "tpe_search" in [a.name for a in algos.search_algo_list]
    info = sdk.call("show_auto_search_yaml_templates_info",
                    ma.ShowAutoSearchYamlTemplatesInfoRequest())
    kind = info.yaml_templates[0]
    content = sdk.call("show_auto_search_yaml_template_content",
                       ma.ShowAutoSearchYamlTemplateContentRequest(
                           algorithm_type=kind.algorithm_type_en,
                           algorithm_name=kind.algorithm_names[0]))
    assert content.file_name.endswith(".yaml") and "auto_search" in content.content

    code = rig.code(tmp_path)
    job_id = _create(sdk, code, "sdk-search", 3, 4)
    done = sdk.wait(job_id, {"Completed", "Failed"}, timeout=120)
    assert done.status.phase == "Completed"
    assert done.algorithm.policies.auto_search.algo_configs[0].name == "tpe_search"

    trials = sdk.call("show_auto_search_trials",
                      ma.ShowAutoSearchTrialsRequest(training_job_id=job_id))
    assert trials.total == 3 and trials.items.header[:2] == ["trial_id", "status"]
    one = sdk.call("show_auto_search_per_trial",
                   ma.ShowAutoSearchPerTrialRequest(training_job_id=job_id, trial_id="1"))
    assert one.data == [trials.items.data[1]]
    analysis = sdk.call("show_auto_search_params_analysis",
                        ma.ShowAutoSearchParamsAnalysisRequest(training_job_id=job_id))
    assert sorted(row[0] for row in analysis.data) == ["lr", "width"]
    path = sdk.call("show_auto_search_param_analysis_result_path",
                    ma.ShowAutoSearchParamAnalysisResultPathRequest(
                        training_job_id=job_id, parameter_name="width"))
    assert path.file_path.endswith("/autosearch-parameter-analysis/width/plot.svg")


def test_sdk_stops_a_trial_early_and_then_the_search(sdk: test_sdk.Sdk,
                                                     live_server: conftest.Live,
                                                     tmp_path: pathlib.Path) -> None:
    job_id = _create(sdk, rig.code(tmp_path), "sdk-search-stop", 4, 100_000)
    test_sdk.poll(lambda: len(rig.trials(live_server, job_id)) == 2, 60, "two trials")

    stopped = sdk.call("show_auto_search_trial_early_stop",
                       ma.ShowAutoSearchTrialEarlyStopRequest(training_job_id=job_id,
                                                              trial_id="0"))
    assert stopped.earlystop_trial == "0"
    test_sdk.poll(lambda: rig.trials(live_server, job_id)[0].state == "early_stopped", 30)
    with pytest.raises(sdk_errors.ClientRequestException) as refused:
        sdk.call("show_auto_search_trial_early_stop",
                 ma.ShowAutoSearchTrialEarlyStopRequest(training_job_id=job_id,
                                                        trial_id="0"))
    assert refused.value.error_code == "ModelArts.2796"

    sdk.terminate(job_id)
    assert sdk.wait(job_id, {"Terminated"}, timeout=60).status.phase == "Terminated"
    assert {t.state for t in rig.trials(live_server, job_id)} <= {"early_stopped", "stopped"}
