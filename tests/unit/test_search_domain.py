"""The search policy's rules (domain/search): what is accepted and how, the trials' state
table against its diagram in docs/search.md, a reward read from a log line."""

from __future__ import annotations

import pathlib
import re
from typing import Any

import pytest

from corral.domain import errors
from corral.domain.search import spec, trials

DOCS = pathlib.Path(__file__).parents[2] / "docs"


def _policy(*params: dict[str, Any], algorithm: str = "grid_search",
            **algo: str) -> dict[str, Any]:
    return {"reward_attrs": [{"name": "acc", "mode": "min"}],
            "search_params": list(params),
            "algo_configs": [{"name": algorithm, "params": [
                {"key": k, "value": v, "type": "int"} for k, v in algo.items()]}]}


def test_grid_search_runs_the_whole_grid_with_num_samples_0_and_never_more() -> None:
    whole = spec.check(_policy(
        {"name": "lr", "lower_bound": 0.1, "upper_bound": 0.5, "discrete_points_num": "5"},
        {"name": "layers", "lower_bound": "1", "upper_bound": "3", "discrete_points_num": 3},
        {"name": "act", "param_type": "discrete", "discrete_values": ["relu", "tanh"]},
        num_samples="0"))
    assert whole.trials == 5 * 3 * 2
    assert whole.space[1].integer and not whole.space[0].integer
    assert whole.space[1].grid() == ["1", "2", "3"]
    assert not whole.maximize
    fewer = spec.check(_policy({"name": "x", "lower_bound": 0, "upper_bound": 1},
                               num_samples="1"))
    assert fewer.trials == 1 and fewer.space[0].grid() == ["0", "1"]
    more = spec.check(_policy({"name": "x", "lower_bound": 0, "upper_bound": 1},
                              num_samples="50"))
    assert more.trials == 2


def test_skip_search_params_leaves_those_parameters_out_of_the_search() -> None:
    """ModelArts' skip_search_params, names comma-separated: those parameters are not
    searched (each trial runs with the value algorithm.parameters gives them)."""
    policy = _policy({"name": "lr", "lower_bound": 0.1, "upper_bound": 0.5,
                      "discrete_points_num": "5"},
                     {"name": "act", "param_type": "discrete", "discrete_values": ["a", "b"]},
                     {"name": "layers", "lower_bound": 1, "upper_bound": 3,
                      "discrete_points_num": 3}, num_samples="0")
    found = spec.check({**policy, "skip_search_params": "act, layers"})
    assert [s.name for s in found.space] == ["lr"]
    assert found.trials == 5
    assert spec.check(policy).trials == 5 * 2 * 3


@pytest.mark.parametrize(("policy", "said"), [
    ({"reward_attrs": []}, "reward_attrs"),
    (_policy({"name": "x", "lower_bound": 1, "upper_bound": 1}), "must be below"),
    (_policy({"name": "x", "upper_bound": 1}), "lower_bound is required"),
    (_policy({"name": "x", "lower_bound": "inf", "upper_bound": 1}), "finite"),
    (_policy({"name": "x", "param_type": "discrete", "discrete_values": ["a", "a"]}),
     "twice"),
    (_policy({"name": "x", "lower_bound": 0, "upper_bound": 1},
             {"name": "x", "lower_bound": 0, "upper_bound": 1}), "named twice"),
    (_policy({"name": "x", "lower_bound": 0, "upper_bound": 1}, num_samples="0.5"),
     "whole number"),
    (_policy({"name": "x", "lower_bound": 0, "upper_bound": 1}, max_concurrent="0"),
     "outside"),
    (_policy({"name": "x", "lower_bound": 0, "upper_bound": 1},
             algorithm="random_search", num_samples="0"), "1 to 10000"),
    (_policy({"name": "bad name", "lower_bound": 0, "upper_bound": 1}), "search_params"),
    ({**_policy({"name": "x", "lower_bound": 0, "upper_bound": 1}),
      "skip_search_params": "x,y"}, "y is not one of search_params (x)"),
    ({**_policy({"name": "x", "lower_bound": 0, "upper_bound": 1}),
      "skip_search_params": " x "}, "nothing is left to search"),
    ({**_policy({"name": "x", "lower_bound": 0, "upper_bound": 1}),
      "reward_attrs": [{"name": "acc", "regex": "(a)(b)"}]}, "at most one group"),
])
def test_a_search_that_could_not_run_is_refused_with_why(policy: dict[str, Any],
                                                         said: str) -> None:
    with pytest.raises(errors.BadParameter, match=re.escape(said)):
        spec.check(policy)


def test_the_trial_diagram_is_the_transition_table() -> None:
    text = (DOCS / "search.md").read_text()
    after = text.split("drawn from corral.domain.search.trials.TRANSITIONS", 1)[1]
    block = after.split("```mermaid", 1)[1].split("```", 1)[0]
    edges = {tuple(part.strip() for part in line.split("-->"))
             for line in block.splitlines() if "-->" in line}
    expected = {(s.value, q.value) for s, nxt in trials.TRANSITIONS.items() for q in nxt}
    expected |= {("[*]", trials.State.RUNNING.value)}
    expected |= {(s.value, "[*]") for s in trials.ENDED}
    assert edges == expected


@pytest.mark.parametrize(("regex", "line", "value"), [
    (r"acc=([0-9.]+)", "epoch 3 acc=0.91 loss=2", 0.91),
    (r"(?<=acc=)[0-9.]+", "acc=0.5;", 0.5),
    (r"acc=([0-9.]+)", "no reward here", None),
    (r"acc=(\S+)", "acc=nan", None),
    (r"acc=(\S+)", "acc=high", None),
])
def test_a_reward_is_read_from_a_log_line(regex: str, line: str, value: float | None) -> None:
    assert trials.reward_in(re.compile(regex), line) == value
