"""`algorithm.policies.auto_search` as ModelArts writes it, checked at submit.

A search that could not run (bounds reversed, an algorithm corral does not have, a reward
regex that does not compile, a discrete parameter without values) is refused when it is
submitted, with the API's error body, and nothing is created.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any, Literal

import pydantic
from pydantic import Field, field_validator

from corral.domain import errors, specs
from corral.domain.search import algorithms

#: the value of a search job's `staging` column: the job runs no task of its own (its
#: trials do), so the queue and the reconciler pass it by
JOB_STAGING = "search"
#: the most trials one search may ask for
MAX_TRIALS = 10_000
_Str = Field(default=None, max_length=64)


class _Model(specs.Model):
    @field_validator("*", mode="before")
    @classmethod
    def _scalars(cls, v: Any) -> Any:
        return specs.scalar_str(v)


class RewardAttr(_Model):
    name: specs.ParameterName
    mode: Literal["max", "min"] = "max"
    regex: str | None = Field(default=None, max_length=1024)


class SearchParam(_Model):
    name: specs.ParameterName
    param_type: str = "continuous"
    lower_bound: str | None = _Str
    upper_bound: str | None = _Str
    discrete_points_num: str | None = _Str
    discrete_values: list[str] = Field(default_factory=list, max_length=1000)

    @field_validator("discrete_values", mode="before")
    @classmethod
    def _values(cls, v: Any) -> Any:
        return [specs.scalar_str(x) for x in v] if isinstance(v, list) else v


class AlgoParam(_Model):
    key: str = Field(max_length=64)
    value: str = Field(default="", max_length=64)
    type: str | None = _Str


class AlgoConfig(_Model):
    name: str = Field(max_length=64)
    params: list[AlgoParam] = Field(default_factory=list, max_length=50)


class AutoSearch(specs.Model):
    skip_search_params: str | None = None
    reward_attrs: list[RewardAttr] = Field(default_factory=list, max_length=10)
    search_params: list[SearchParam] = Field(default_factory=list, max_length=50)
    algo_configs: list[AlgoConfig] = Field(default_factory=list, max_length=10)


@dataclasses.dataclass(frozen=True)
class Space:
    """One searched parameter: a range (`low`..`high`, whole numbers when `integer`), or
    `choices`; `points` evenly spaced values of a range for grid search."""

    name: str
    low: float = 0.0
    high: float = 0.0
    integer: bool = False
    choices: tuple[str, ...] = ()
    points: int = 0

    def grid(self) -> list[str]:
        """The values grid search tries."""
        if self.choices:
            return list(self.choices)
        n = max(self.points, 2)
        values = [self.low + (self.high - self.low) * i / (n - 1) for i in range(n)]
        if self.integer:
            return [str(v) for v in dict.fromkeys(round(x) for x in values)]
        return [format(v, ".6g") for v in values]


@dataclasses.dataclass(frozen=True)
class Search:
    """A checked search: its objective, its space, its algorithm and that one's params."""

    reward: str
    maximize: bool
    regex: str | None
    space: tuple[Space, ...]
    algorithm: algorithms.Algorithm
    params: dict[str, float]

    @property
    def trials(self) -> int:
        """How many trials it runs: num_samples, or the whole grid for grid search."""
        n = int(self.params["num_samples"])
        if self.algorithm.sampler == "grid":
            size = math.prod(len(s.grid()) for s in self.space)
            return min(n, size) if n else size
        return n

    @property
    def parallel(self) -> int:
        return int(self.params["max_concurrent"])

    @property
    def time_budget_ms(self) -> int:
        return int(self.params["time_budget"]) * 1000


def policy_of(algorithm: specs.Algorithm) -> dict[str, Any] | None:
    """The job's auto_search policy, if it asks for a search."""
    found = (algorithm.policies or {}).get("auto_search")
    return found if found else None


def checked_policy(algorithm: specs.Algorithm) -> dict[str, Any] | None:
    """The job's auto_search policy, checked (errors.BadParameter), if it asks for a
    search. A search from ModelArts' YAML file and framework folder is refused: corral
    reads a search from policies.auto_search alone."""
    for field in ("autosearch_config_path", "autosearch_framework_path"):
        if getattr(algorithm, field):
            raise errors.BadParameter(
                f"algorithm.{field}: corral does not read a search from a YAML file or a "
                "framework folder; give the search in algorithm.policies.auto_search "
                "(docs/search.md)")
    policy = policy_of(algorithm)
    if policy is not None:
        check(policy)
    return policy


def check(raw: Any) -> Search:
    """The search `raw` (an auto_search policy) asks for, or errors.BadParameter."""
    try:
        policy = AutoSearch.model_validate(raw)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise errors.BadParameter(f"policies.auto_search.{where}: {first['msg']}") from None
    if not policy.reward_attrs:
        raise errors.BadParameter("policies.auto_search.reward_attrs: give the reward "
                                  "(name, mode max|min, regex)")
    reward = policy.reward_attrs[0]
    _compile(reward.regex)
    if not policy.search_params:
        raise errors.BadParameter("policies.auto_search.search_params: give at least one "
                                  "parameter to search")
    names = [p.name for p in policy.search_params]
    if len(set(names)) != len(names):
        raise errors.BadParameter("policies.auto_search.search_params: a parameter is "
                                  "named twice")
    skipped = _skipped(policy.skip_search_params, names)
    space = tuple(_space(p) for p in policy.search_params if p.name not in skipped)
    if len(policy.algo_configs) != 1:
        raise errors.BadParameter("policies.auto_search.algo_configs: give one algorithm "
                                  f"(one of {', '.join(algorithms.ALGORITHMS)})")
    algorithm, params = _algorithm(policy.algo_configs[0])
    search = Search(reward=reward.name, maximize=reward.mode == "max", regex=reward.regex,
                    space=space, algorithm=algorithm, params=params)
    if not 1 <= search.trials <= MAX_TRIALS:
        raise errors.BadParameter(f"policies.auto_search: {search.trials} trials; a search "
                                  f"runs 1 to {MAX_TRIALS}")
    return search


def _skipped(raw: str | None, names: list[str]) -> set[str]:
    """The search parameters `skip_search_params` (names, comma-separated) leaves out:
    they keep the value algorithm.parameters gives them, in every trial."""
    skipped = {n.strip() for n in (raw or "").split(",") if n.strip()}
    unknown = sorted(skipped - set(names))
    if unknown:
        raise errors.BadParameter(
            f"policies.auto_search.skip_search_params: {', '.join(unknown)} is not one of "
            f"search_params ({', '.join(names)})")
    if skipped == set(names):
        raise errors.BadParameter("policies.auto_search.skip_search_params skips every "
                                  "parameter: nothing is left to search")
    return skipped


def _compile(regex: str | None) -> None:
    if regex is None:
        return
    try:
        compiled = re.compile(regex)
    except re.error as exc:
        raise errors.BadParameter(f"policies.auto_search.reward_attrs.regex '{regex}' does "
                                  f"not compile: {exc}") from None
    if compiled.groups > 1:
        raise errors.BadParameter(f"policies.auto_search.reward_attrs.regex '{regex}': at "
                                  "most one group (the number)")


def _number(p: SearchParam, field: str, value: str | None) -> float:
    where = f"policies.auto_search.search_params '{p.name}': {field}"
    if value is None or value == "":
        raise errors.BadParameter(f"{where} is required for a continuous parameter")
    try:
        number = float(value)
    except ValueError:
        raise errors.BadParameter(f"{where} '{value}' is not a number") from None
    if not math.isfinite(number):
        raise errors.BadParameter(f"{where} must be a finite number")
    return number


def _space(p: SearchParam) -> Space:
    where = f"policies.auto_search.search_params '{p.name}'"
    if p.param_type == "discrete":
        if not p.discrete_values:
            raise errors.BadParameter(f"{where}: a discrete parameter needs discrete_values")
        if len(set(p.discrete_values)) != len(p.discrete_values):
            raise errors.BadParameter(f"{where}: discrete_values holds a value twice")
        return Space(name=p.name, choices=tuple(p.discrete_values))
    if p.param_type != "continuous":
        raise errors.BadParameter(f"{where}: param_type '{p.param_type}' is not continuous "
                                  "or discrete")
    low = _number(p, "lower_bound", p.lower_bound)
    high = _number(p, "upper_bound", p.upper_bound)
    if not low < high:
        raise errors.BadParameter(f"{where}: lower_bound {p.lower_bound} must be below "
                                  f"upper_bound {p.upper_bound}")
    points = 0
    if p.discrete_points_num:
        if not specs.INT_RE.match(p.discrete_points_num) or \
                not 2 <= int(p.discrete_points_num) <= 1000:
            raise errors.BadParameter(f"{where}: discrete_points_num is 2 to 1000")
        points = int(p.discrete_points_num)
    integer = all(specs.INT_RE.match(b or "") for b in (p.lower_bound, p.upper_bound))
    return Space(name=p.name, low=low, high=high, integer=integer, points=points)


def _algorithm(config: AlgoConfig) -> tuple[algorithms.Algorithm, dict[str, float]]:
    algorithm = algorithms.ALGORITHMS.get(config.name)
    if algorithm is None:
        raise errors.BadParameter(f"policies.auto_search.algo_configs: unknown algorithm "
                                  f"'{config.name}' (one of "
                                  f"{', '.join(algorithms.ALGORITHMS)})")
    known = {p.key: p for p in algorithm.params}
    given: dict[str, str] = {}
    for item in config.params:
        param = known.get(item.key)
        where = f"policies.auto_search.algo_configs '{config.name}': param '{item.key}'"
        if param is None:
            raise errors.BadParameter(f"{where} is not one of {', '.join(known)}")
        try:
            value = float(item.value)
        except ValueError:
            raise errors.BadParameter(f"{where}: '{item.value}' is not a number") from None
        if param.type == "int" and not value.is_integer():
            raise errors.BadParameter(f"{where}: '{item.value}' is not a whole number")
        if not param.low <= value <= param.high:
            raise errors.BadParameter(f"{where}: {item.value} is outside "
                                      f"{param.low:g}..{param.high:g}")
        given[item.key] = item.value
    return algorithm, algorithms.params_of(algorithm, given)
