"""The rules of making a job of an algorithm (domain/algorithms.py), without a server."""

from __future__ import annotations

from typing import Any

import pytest

from corral.domain import algorithms, errors, specs


def saved(**job_config: Any) -> algorithms.AlgorithmBody:
    cfg = {"command": "true", **job_config}
    return algorithms.AlgorithmBody.model_validate({"metadata": {"name": "algo"},
                                                    "job_config": cfg})


def job(**fields: Any) -> specs.Algorithm:
    return specs.Algorithm.model_validate({"id": "a1", **fields})


@pytest.mark.parametrize(("value", "constraint", "problem"), [
    ("3", {"type": "Integer"}, None),
    ("3.5", {"type": "Integer"}, "'3.5' is not an Integer"),
    ("1e-3", {"type": "Float"}, None),
    ("nan", {"type": "Float"}, "'nan' is not a Float"),
    ("TRUE", {"type": "Boolean"}, None),
    ("yes", {"type": "Boolean"}, "'yes' is not a Boolean (true or false)"),
    ("1", {"valid_type": "Range", "valid_range": ["1", "2"]}, None),
    ("2.5", {"valid_type": "Range", "valid_range": ["1", "2"]}, "2.5 is outside [1, 2]"),
    ("adam", {"valid_type": "Enumeration", "valid_range": ["sgd"]}, "'adam' is not one of sgd"),
])
def test_a_value_meets_its_constraint_or_says_why_not(value: str, constraint: dict[str, Any],
                                                      problem: str | None) -> None:
    assert algorithms.violation(value, algorithms.Constraint(**constraint)) == problem


def test_the_job_gets_the_algorithms_code_and_engine_and_its_own_environment() -> None:
    body = saved(command=None, code_dir="/code", boot_file="train.py",
                 engine={"engine_id": "py"})
    made = algorithms.apply("a1", body, job(environments={"A": "1"}))
    assert (made.id, made.name, made.code_dir, made.boot_file) == ("a1", "algo", "/code",
                                                                   "train.py")
    assert made.engine == specs.Engine(engine_id="py")
    assert made.environments == {"A": "1"}


def test_an_optional_parameter_left_empty_is_not_passed() -> None:
    body = saved(parameters=[{"name": "seed"}, {"name": "lr", "value": "0.1"}])
    made = algorithms.apply("a1", body, job())
    assert [(p.name, p.value) for p in made.parameters] == [("lr", "0.1")]


def test_an_unchanged_value_of_a_fixed_parameter_is_fine() -> None:
    body = saved(parameters=[{"name": "m", "value": "x", "constraint": {"editable": False}}])
    made = algorithms.apply("a1", body, job(parameters=[{"name": "m", "value": "x"}]))
    assert [(p.name, p.value) for p in made.parameters] == [("m", "x")]


def test_a_jobs_search_takes_what_it_leaves_empty_from_the_algorithm() -> None:
    auto = {"reward_attrs": [{"name": "acc", "mode": "max", "regex": "acc=([0-9.]+)"}],
            "search_params": [{"name": "lr", "lower_bound": "0.01", "upper_bound": "1"}],
            "algo_configs": [{"name": "random_search",
                              "params": [{"key": "num_samples", "value": "4"}]}]}
    body = algorithms.AlgorithmBody.model_validate(
        {"metadata": {"name": "algo"}, "job_config": {"command": "true"},
         "advanced_config": {"auto_search": auto}})
    mine = [{"name": "lr", "lower_bound": "0.1", "upper_bound": "0.5"}]
    made = algorithms.apply("a1", body, job(policies={"auto_search": {"search_params": mine}}))
    assert made.policies is not None
    policy = made.policies["auto_search"]
    assert policy["search_params"] == mine
    assert policy["reward_attrs"][0]["name"] == "acc"
    assert policy["algo_configs"][0]["name"] == "random_search"
    # A job that asks for no search runs none.
    assert algorithms.apply("a1", body, job()).policies is None


def test_a_complete_search_in_an_algorithm_is_checked_when_saved() -> None:
    with pytest.raises(errors.BadParameter, match="algo_configs"):
        algorithms.AlgorithmBody.model_validate(
            {"metadata": {"name": "algo"}, "job_config": {"command": "true"},
             "advanced_config": {"auto_search": {
                 "reward_attrs": [{"name": "acc"}],
                 "search_params": [{"name": "lr", "lower_bound": "0", "upper_bound": "1"}],
                 "algo_configs": [{"name": "no_such_search"}]}}})


@pytest.mark.parametrize(("key", "values", "gpu", "nodes", "ok"), [
    ("flavor_type", ["GPU"], 0, 1, False),
    ("flavor_type", ["CPU", "GPU"], 1, 1, True),
    ("device_distributed_mode", ["singular"], 2, 1, False),
    ("device_distributed_mode", ["multiple"], 1, 1, True),
    ("host_distributed_mode", ["singular"], 0, 3, False),
    ("host_distributed_mode", ["multiple"], 0, 3, True),
])
def test_resource_requirements(key: str, values: list[str], gpu: int, nodes: int,
                               ok: bool) -> None:
    need = [algorithms.ResourceRequirement(key=key, values=values)]  # type: ignore[arg-type]
    if ok:
        algorithms.check_resources("algo", need, gpu=gpu, node_count=nodes)
    else:
        with pytest.raises(errors.BadParameter, match=f"needs {key}"):
            algorithms.check_resources("algo", need, gpu=gpu, node_count=nodes)
