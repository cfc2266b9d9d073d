"""The search algorithms corral offers, with their parameters and defaults.

Every algorithm is a sampler and, for those that stop losing trials early, a pruner of
Optuna's (kinds/search/study.py builds them); this table is what `GET /search-algorithms`
shows and what `algo_configs` is checked against. Each algorithm takes the common
parameters (how many trials, how many at once, a time budget, a seed) and its own.
"""

from __future__ import annotations

import dataclasses
import enum


class Pruning(enum.StrEnum):
    NONE = "none"  #: every trial runs to its end
    MEDIAN = "median"  #: stopped when worse than the median of earlier trials at a step
    ASHA = "asha"  #: asynchronous successive halving: rungs keep the best 1/factor


@dataclasses.dataclass(frozen=True)
class Param:
    key: str
    default: int | float
    type: str  #: "int" or "float", as the reference's `type`
    description: str
    low: float = 0
    high: float = 1_000_000


@dataclasses.dataclass(frozen=True)
class Algorithm:
    name: str
    sampler: str  #: "random", "grid" or "tpe"
    pruning: Pruning
    description: str
    params: tuple[Param, ...]


COMMON = (
    Param("num_samples", 10, "int", "how many trials the search runs (grid_search: 0 runs "
          "the whole grid)", 0, 10_000),
    Param("max_concurrent", 2, "int", "how many trials run at once (the rest of the pool "
          "stays free for other jobs)", 1, 1000),
    Param("time_budget", 0, "int", "seconds after which no new trial starts (0: none)",
          0, 30 * 86400),
    Param("seed", 0, "int", "the sampler's seed: the same seed samples the same trials",
          0, 2**31 - 1),
)
_TPE = Param("n_startup_trials", 5, "int", "trials sampled at random before TPE models "
             "the results", 0, 1000)
_MEDIAN = (Param("n_startup_trials", 3, "int", "trials that run to their end before any "
                 "is stopped", 0, 1000),
           Param("n_warmup_steps", 1, "int", "steps a trial reports before it may be "
                 "stopped", 0, 1_000_000))
_ASHA = (Param("min_resource", 1, "int", "steps a trial reports before its first rung",
               1, 1_000_000),
         Param("reduction_factor", 3, "int", "each rung keeps the best 1/factor of trials",
               2, 100))

ALGORITHMS: dict[str, Algorithm] = {a.name: a for a in (
    Algorithm("random_search", "random", Pruning.NONE,
              "Samples each parameter at random within its bounds.", COMMON),
    Algorithm("grid_search", "grid", Pruning.NONE,
              "Tries every combination of the parameters' values (a continuous parameter "
              "takes discrete_points_num evenly spaced values).", COMMON),
    Algorithm("tpe_search", "tpe", Pruning.NONE,
              "Tree-structured Parzen estimator (Bayesian): samples where earlier trials "
              "did well.", (*COMMON, _TPE)),
    Algorithm("median_stop_search", "tpe", Pruning.MEDIAN,
              "TPE sampling; a trial whose intermediate reward is worse than the median of "
              "earlier trials at the same step is stopped early.", (*COMMON, *_MEDIAN)),
    Algorithm("asha_search", "tpe", Pruning.ASHA,
              "TPE sampling with asynchronous successive halving: at each rung only the best "
              "1/reduction_factor of trials go on.", (*COMMON, _TPE, *_ASHA)),
)}

#: the reference's YAML template type: every algorithm corral offers is of it
TEMPLATE_TYPE = "hyperparameter_search"
TEMPLATE_TYPE_ZH = "超参搜索"


def params_of(algorithm: Algorithm, given: dict[str, str]) -> dict[str, float]:
    """The algorithm's parameters, the given ones over the defaults (checked already)."""
    out: dict[str, float] = {}
    for p in algorithm.params:
        raw = given.get(p.key)
        out[p.key] = (float(raw) if p.type == "float" else int(float(raw))) \
            if raw is not None else p.default
    return out
