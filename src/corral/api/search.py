"""Hyperparameter search, as ModelArts answers it: the algorithms, their YAML templates,
a search job's trials, a trial stopped early, the parameters' importance and its plot.

A search is a training job with `algorithm.policies.auto_search` (created by
POST /training-jobs); its trials are training jobs it owns, whose logs and metrics are read
as any job's. corral adds the plot itself (SVG), at the path the image-path call answers.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import Response

from corral.api import auth, schemas
from corral.api.deps import Ctx
from corral.domain import specs
from corral.kinds.search import actions

router = APIRouter(prefix="/v2/{project_id}", tags=["hyperparameter search"])
ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": schemas.ErrorBody} for code in (400, 404, 409, 500)}
_JOB = "/training-jobs/{training_job_id}"


@router.get("/search-algorithms", responses=ERRORS)
def list_search_algorithms(project_id: str) -> dict[str, Any]:
    """The search algorithms corral offers, each with its params and their defaults."""
    return actions.algorithms_list()


@router.get("/training-jobs/autosearch/yaml-templates", responses=ERRORS)
def list_yaml_templates(project_id: str) -> dict[str, Any]:
    return actions.templates()


@router.get("/training-jobs/autosearch/yaml-templates/{algorithm_type}/{algorithm_name}",
            responses=ERRORS)
def show_yaml_template(project_id: str, algorithm_type: str,
                       algorithm_name: str) -> dict[str, Any]:
    """An `auto_search` policy for the algorithm, its params at their defaults."""
    return actions.template(algorithm_type, algorithm_name)


@router.get(_JOB + "/autosearch-trials", responses=ERRORS)
def list_trials(project_id: str, training_job_id: str, ctx: Ctx,
                offset: Annotated[specs.Count, Query()] = 0,
                limit: Annotated[int | None, Query(ge=1, le=10_000)] = None) -> dict[str, Any]:
    """The search's trials: `items.header` names the columns (trial_id, status, each
    searched parameter, the reward, job_id, reason), `items.data` holds a row a trial."""
    with ctx.store.read() as conn:
        return actions.table(conn, project_id, training_job_id, offset=offset, limit=limit)


@router.get(_JOB + "/autosearch-trials/{trial_id}", responses=ERRORS)
def show_trial(project_id: str, training_job_id: str, trial_id: str,
               ctx: Ctx) -> dict[str, Any]:
    with ctx.store.read() as conn:
        return actions.one(conn, project_id, training_job_id, trial_id)


@router.get(_JOB + "/autosearch-trial-rewards", responses=ERRORS)
def list_trial_rewards(project_id: str, training_job_id: str, ctx: Ctx) -> dict[str, Any]:
    """corral's: each trial's intermediate rewards by step (`steps`, `values`), with the
    reward's name and `mode`: the trials' learning curves, as the console draws them."""
    with ctx.store.read() as conn:
        return actions.curves(conn, project_id, training_job_id)


@router.post(_JOB + "/autosearch-trial-earlystop/{trial_id}", responses=ERRORS)
def early_stop_trial(project_id: str, training_job_id: str, trial_id: str, ctx: Ctx,
                     caller: auth.Caller) -> dict[str, Any]:
    """Stop a running trial now (its job is stopped as a terminate stops it); it ends
    `early_stopped` and the search goes on with its others."""
    number = actions.stop_trial(ctx, project_id, training_job_id, trial_id, caller, ctx.now())
    ctx.wake()
    ctx.wake_kinds()
    return {"earlystop_trial": number}


@router.get(_JOB + "/autosearch-parameter-analysis", responses=ERRORS)
def show_parameter_analysis(project_id: str, training_job_id: str,
                            ctx: Ctx) -> dict[str, Any]:
    """The searched parameters ranked by their importance to the reward (Optuna's
    evaluator over the completed trials; empty importances with fewer than two)."""
    with ctx.store.read() as conn:
        return actions.analysis(conn, project_id, training_job_id)


@router.get(_JOB + "/autosearch-parameter-analysis/{parameter_name}", responses=ERRORS)
def show_parameter_plot_path(project_id: str, training_job_id: str, parameter_name: str,
                             ctx: Ctx) -> dict[str, Any]:
    """Where the plot of the parameter against the reward is (an SVG this server draws)."""
    with ctx.store.read() as conn:
        actions.points(conn, project_id, training_job_id, parameter_name)
    return {"file_path": f"/v2/{project_id}/training-jobs/{training_job_id}"
                         f"/autosearch-parameter-analysis/{parameter_name}/plot.svg"}


@router.get(_JOB + "/autosearch-parameter-analysis/{parameter_name}/plot.svg",
            responses=ERRORS, response_class=Response)
def show_parameter_plot(project_id: str, training_job_id: str, parameter_name: str,
                        ctx: Ctx) -> Response:
    """corral's: the plot, one dot a rewarded trial (the parameter's value, its reward)."""
    with ctx.store.read() as conn:
        search, pts = actions.points(conn, project_id, training_job_id, parameter_name)
    return Response(actions.svg(search, parameter_name, pts), media_type="image/svg+xml")
