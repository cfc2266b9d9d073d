"""The search algorithms as Optuna's samplers and pruners, over a study rebuilt from the
database at every pass.

corral's tables are the only record of a search: each pass rebuilds an in-memory study
from the trials stored (their parameters, the sampler's attributes, their intermediate and
final rewards) with the sampler seeded from the search's seed and the number of trials so
far. A server killed at any moment rebuilds the same study, and a trial's parameters are
stored with its job in one transaction, so no trial is lost or sampled twice.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Sequence
from typing import Any

import optuna

from corral.domain.search import algorithms, spec, trials
from corral.store import kind_rows, search_repo

optuna.logging.set_verbosity(optuna.logging.WARNING)
Dist = optuna.distributions.BaseDistribution
_STATES = {trials.State.COMPLETED: optuna.trial.TrialState.COMPLETE,
           trials.State.PRUNED: optuna.trial.TrialState.PRUNED,
           trials.State.EARLY_STOPPED: optuna.trial.TrialState.PRUNED,
           trials.State.STOPPED: optuna.trial.TrialState.PRUNED,
           trials.State.FAILED: optuna.trial.TrialState.FAIL,
           trials.State.RUNNING: optuna.trial.TrialState.RUNNING,
           trials.State.STOPPING: optuna.trial.TrialState.RUNNING}


def distributions(search: spec.Search) -> dict[str, Dist]:
    out: dict[str, Dist] = {}
    for s in search.space:
        if s.choices or search.algorithm.sampler == "grid":
            out[s.name] = optuna.distributions.CategoricalDistribution(
                list(s.choices) or s.grid())
        elif s.integer:
            out[s.name] = optuna.distributions.IntDistribution(int(s.low), int(s.high))
        else:
            out[s.name] = optuna.distributions.FloatDistribution(s.low, s.high)
    return out


def sampler(search: spec.Search, asked: int) -> optuna.samplers.BaseSampler:
    """The algorithm's sampler, seeded by the search's seed and the trials asked so far
    (the same stored trials give the same next trial, whichever server asks)."""
    seed = int(search.params["seed"]) * 100_003 + asked
    kind = search.algorithm.sampler
    if kind == "grid":
        # The seed shuffles the grid, and trial n takes cell n of it: the same shuffle
        # at every rebuild, or the cells would repeat.
        return optuna.samplers.GridSampler({s.name: list(s.choices) or s.grid()
                                            for s in search.space},
                                           seed=int(search.params["seed"]))
    if kind == "tpe":
        return optuna.samplers.TPESampler(
            seed=seed, constant_liar=True,
            n_startup_trials=int(search.params.get("n_startup_trials", 5)))
    return optuna.samplers.RandomSampler(seed=seed)


def pruner(search: spec.Search) -> optuna.pruners.BasePruner:
    p = search.params
    match search.algorithm.pruning:
        case algorithms.Pruning.MEDIAN:
            return optuna.pruners.MedianPruner(n_startup_trials=int(p["n_startup_trials"]),
                                               n_warmup_steps=int(p["n_warmup_steps"]))
        case algorithms.Pruning.ASHA:
            return optuna.pruners.SuccessiveHalvingPruner(
                min_resource=int(p["min_resource"]),
                reduction_factor=int(p["reduction_factor"]))
    return optuna.pruners.NopPruner()


def _value(d: Dist, text: str) -> Any:
    if isinstance(d, optuna.distributions.IntDistribution):
        return int(float(text))
    if isinstance(d, optuna.distributions.FloatDistribution):
        return float(text)
    return text


def frozen(search: spec.Search, t: kind_rows.SearchTrial,
           dists: dict[str, Dist]) -> optuna.trial.FrozenTrial:
    """The stored trial as Optuna's."""
    state = _STATES[trials.State(t.state)]
    done = state == optuna.trial.TrialState.COMPLETE
    value = t.reward if done and t.reward is not None else None
    if done and value is None:
        state = optuna.trial.TrialState.FAIL
    params = search_repo.params(t)
    return optuna.trial.create_trial(
        params={k: _value(dists[k], v) for k, v in params.items() if k in dists},
        distributions={k: d for k, d in dists.items() if k in params},
        value=value, intermediate_values=search_repo.intermediate(t), state=state,
        system_attrs=json.loads(t.system_attrs))


def rebuild(search: spec.Search, stored: Sequence[kind_rows.SearchTrial]) -> optuna.Study:
    """The search's study as the stored trials make it, in their order."""
    dists = distributions(search)
    study = optuna.create_study(
        direction="maximize" if search.maximize else "minimize",
        sampler=sampler(search, len(stored)), pruner=pruner(search))
    study.add_trials([frozen(search, t, dists) for t in stored])
    return study


def ask(search: spec.Search, study: optuna.Study) -> tuple[dict[str, str], dict[str, Any]]:
    """The next trial's parameters (as its job gets them) and the sampler's attributes."""
    trial = study.ask(distributions(search))
    params = {k: _text(v) for k, v in trial.params.items()}
    return params, dict(study.trials[trial.number].system_attrs)


def _text(v: Any) -> str:
    return format(v, ".6g") if isinstance(v, float) else str(v)


def should_prune(study: optuna.Study, number: int) -> tuple[bool, dict[str, Any]]:
    """Whether the pruner stops trial `number` (running, in `study`) at its last step, and
    its sampler/pruner attributes after asking (successive halving records its rungs)."""
    frozen_trial = study.trials[number]
    if not frozen_trial.intermediate_values:
        return False, dict(frozen_trial.system_attrs)
    verdict = study.pruner.prune(study, frozen_trial)
    return verdict, dict(study.trials[number].system_attrs)


def importances(search: spec.Search,
                stored: Sequence[kind_rows.SearchTrial]) -> dict[str, float]:
    """Each searched parameter's importance to the reward, by Optuna's evaluator (fANOVA
    where scikit-learn is installed, PED-ANOVA otherwise); {} with too few trials."""
    done = [t for t in stored if t.state == trials.State.COMPLETED and t.reward is not None]
    if len(done) < 2:
        return {}
    study = rebuild(search, done)
    evaluator: optuna.importance.BaseImportanceEvaluator = (
        optuna.importance.FanovaImportanceEvaluator(seed=0)
        if importlib.util.find_spec("sklearn") else
        optuna.importance.PedAnovaImportanceEvaluator())
    try:
        found = optuna.importance.get_param_importances(study, evaluator=evaluator)
    except (ValueError, RuntimeError, ZeroDivisionError):
        return {}
    return {k: float(v) for k, v in found.items()}
