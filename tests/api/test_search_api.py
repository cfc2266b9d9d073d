"""Hyperparameter search over real HTTP: a bad `auto_search` refused at submit with the
ModelArts error body and nothing made; the algorithms, templates, trials, early stop,
importance and plot calls in the reference's shapes."""

from __future__ import annotations

import copy
import pathlib
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests import conftest
from tests import factories as f
from tests.integration import search_rig as rig


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[conftest.Live]:
    server = conftest.start_live(tmp_path_factory.mktemp("search") / "home")
    yield server
    conftest.stop_live(server)


@pytest.fixture(scope="module")
def code(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    return rig.code(tmp_path_factory.mktemp("code"))


def _jobs(live: conftest.Live) -> int:
    r = live.http.post(live.path("/training-job-searches"), json={})
    assert r.status_code == 200, r.text
    return int(r.json()["total"])


def _bad(change: str) -> dict[str, Any]:
    p = rig.policy()
    reward, params, algo = p["reward_attrs"][0], p["search_params"], p["algo_configs"][0]
    if change == "reversed":
        params[0].update(lower_bound="0.1", upper_bound="0.0001")
    elif change == "algorithm":
        algo["name"] = "simulated_annealing"
    elif change == "regex":
        reward["regex"] = "accuracy=([0-9.]+"
    elif change == "no values":
        params[1]["discrete_values"] = []
    elif change == "param type":
        params[0]["param_type"] = "log_uniform"
    elif change == "algo param":
        algo["params"].append({"key": "temperature", "value": "3", "type": "int"})
    elif change == "bound not a number":
        params[0]["lower_bound"] = "small"
    return p


@pytest.mark.parametrize("change", ["reversed", "algorithm", "regex", "no values",
                                    "param type", "algo param", "bound not a number"])
def test_a_bad_auto_search_is_refused_and_nothing_is_made(
        live: conftest.Live, code: pathlib.Path, change: str) -> None:
    before = _jobs(live)
    r = live.http.post(live.path("/training-jobs"), json=rig.body(code, _bad(change)))

    assert r.status_code == 400, r.text
    assert set(r.json()) == {"error_code", "error_msg"}
    assert r.json()["error_code"] == "ModelArts.2788"
    assert "auto_search" in r.json()["error_msg"]
    assert _jobs(live) == before


@pytest.mark.parametrize("field", ["autosearch_config_path", "autosearch_framework_path"])
def test_a_search_from_a_yaml_file_is_refused_in_words(
        live: conftest.Live, code: pathlib.Path, field: str) -> None:
    """ModelArts' search from a YAML file and a framework folder: never accepted and
    ignored (the job would run once, unsearched)."""
    before = _jobs(live)
    body = rig.body(code, rig.policy())
    body["algorithm"][field] = "obs://bucket/search.yaml"
    r = live.http.post(live.path("/training-jobs"), json=body)

    assert r.status_code == 400, r.text
    assert r.json()["error_code"] == "ModelArts.2788"
    assert f"algorithm.{field}" in r.json()["error_msg"]
    assert "policies.auto_search" in r.json()["error_msg"]
    assert _jobs(live) == before


def test_the_algorithms_and_their_templates(live: conftest.Live) -> None:
    algos = live.http.get(live.path("/search-algorithms")).json()
    names = [a["name"] for a in algos["search_algo_list"]]
    assert algos["search_algo_count"] == len(names)
    assert {"random_search", "grid_search", "tpe_search", "asha_search"} <= set(names)
    tpe = next(a for a in algos["search_algo_list"] if a["name"] == "tpe_search")
    assert {"key": "num_samples", "value": "10", "type": "int"} in tpe["params"]

    info = live.http.get(live.path("/training-jobs/autosearch/yaml-templates")).json()
    kind = info["yaml_templates"][0]
    assert kind["algorithm_names"] == names
    r = live.http.get(live.path(f"/training-jobs/autosearch/yaml-templates/"
                                f"{kind['algorithm_type_en']}/asha_search"))
    assert r.status_code == 200, r.text
    assert r.json()["file_name"] == "asha_search.yaml"
    # A template is a policy a search may be submitted with, as it is.
    policy = yaml.safe_load(r.json()["content"])["auto_search"]
    from corral.domain.search import spec
    assert spec.check(policy).algorithm.name == "asha_search"


def test_trials_table_one_trial_importance_and_plot(live: conftest.Live,
                                                    code: pathlib.Path) -> None:
    job = live.submit(rig.body(code, rig.policy("tpe_search", samples=4, parallel=2)))
    job_id = job["metadata"]["id"]
    assert live.wait(job_id, timeout=120)["status"]["phase"] == "Completed"
    base = f"/training-jobs/{job_id}"

    table = live.http.get(live.path(f"{base}/autosearch-trials")).json()
    assert (table["total"], table["count"]) == (4, 4)
    header = table["items"]["header"]
    assert header[:5] == ["trial_id", "status", "lr", "width", "accuracy"]
    assert [row[:2] for row in table["items"]["data"]] == [
        [str(n), "completed"] for n in range(4)]
    page = live.http.get(live.path(f"{base}/autosearch-trials"),
                         params={"offset": 3, "limit": 2}).json()
    assert (page["count"], page["items"]["data"][0][0]) == (1, "3")
    one = live.http.get(live.path(f"{base}/autosearch-trials/2")).json()
    assert one == {"header": header, "data": [table["items"]["data"][2]]}
    missing = live.http.get(live.path(f"{base}/autosearch-trials/9"))
    assert missing.status_code == 404 and missing.json()["error_code"] == "ModelArts.2775"

    analysis = live.http.get(live.path(f"{base}/autosearch-parameter-analysis")).json()
    assert analysis["header"] == ["parameter", "importance"]
    assert sorted(row[0] for row in analysis["data"]) == ["lr", "width"]
    path = live.http.get(live.path(f"{base}/autosearch-parameter-analysis/lr")).json()
    image = live.http.get(path["file_path"])
    assert image.status_code == 200 and image.headers["content-type"] == "image/svg+xml"
    assert image.text.startswith("<svg") and image.text.count("<circle") == 4

    # corral's: each trial's intermediate rewards by step, its last one its reward.
    curves = live.http.get(live.path(f"{base}/autosearch-trial-rewards")).json()
    assert (curves["reward"], curves["mode"]) == ("accuracy", "max")
    assert [c["trial_id"] for c in curves["trials"]] == ["0", "1", "2", "3"]
    for curve, row in zip(curves["trials"], table["items"]["data"], strict=True):
        assert curve["job_id"] == row[5] and curve["status"] == "completed"
        assert curve["steps"] == [0, 1, 2, 3]  # a regex's match: its count
        assert f"{curve['values'][-1]:g}" == row[4]
        assert curve["values"] == sorted(curve["values"])  # the rig's rises step by step


def test_a_trial_stopped_early_by_hand_ends_and_the_search_goes_on(
        live: conftest.Live, code: pathlib.Path) -> None:
    policy = rig.policy(samples=2, parallel=1)
    job = live.submit(rig.body(code, policy, steps=2000, pause=0.05))
    job_id = job["metadata"]["id"]
    base = f"/training-jobs/{job_id}"
    first = f.wait_for(lambda: next(iter(rig.trials(live, job_id)), None), 60, "trial 0")
    live.wait(first.job_id, {"Running"})

    r = live.http.post(live.path(f"{base}/autosearch-trial-earlystop/0"))
    assert r.status_code == 200, r.text
    assert r.json() == {"earlystop_trial": "0"}
    assert live.wait(first.job_id, timeout=30)["status"]["phase"] == "Terminated"
    f.wait_for(lambda: rig.trials(live, job_id)[0].state == "early_stopped", 30, "ended")
    again = live.http.post(live.path(f"{base}/autosearch-trial-earlystop/0"))
    assert again.status_code == 409, again.text
    # The search went on with its next trial; stopping the search stops that one.
    f.wait_for(lambda: len(rig.trials(live, job_id)) == 2, 30, "trial 1")
    live.http.post(live.path(f"{base}/actions"), json={"action_type": "terminate"})
    assert live.wait(job_id, timeout=60)["status"]["phase"] == "Terminated"


def test_a_plain_job_is_no_search(live: conftest.Live) -> None:
    job = live.submit(f.make_job(command="echo hi"))
    r = live.http.get(live.path(f"/training-jobs/{job['metadata']['id']}/autosearch-trials"))
    assert r.status_code == 404 and r.json()["error_code"] == "ModelArts.2775"
    assert copy.deepcopy(r.json())["error_msg"].endswith("is not a hyperparameter search")
