"""What users see of a search and do to it, for the API: the trials table (`header` +
`data`, as ModelArts answers), a trial stopped early by hand, the parameters ranked by
importance, and a plot of one parameter against the reward (SVG, drawn here: no plotting
library is needed). The reads run in the caller's transaction; `stop_trial`, the one
change, opens its own."""

from __future__ import annotations

import html
from typing import Any

import sqlalchemy as sa
import yaml

from corral.domain import errors, identity, jobs
from corral.domain.search import algorithms, spec, trials
from corral.kinds.search import common
from corral.services import runtime
from corral.store import job_repo, kind_rows, rows, search_repo

State = trials.State


def search_job(conn: sa.Connection, project_id: str,
               job_id: str) -> tuple[rows.Job, kind_rows.Search, spec.Search]:
    """The project's search job, its row and its policy; NotFound otherwise."""
    job = job_repo.get_job(conn, project_id, job_id)
    s = search_repo.get(conn, job.id)
    return job, s, common.search_of(s)


def header(search: spec.Search) -> list[str]:
    return ["trial_id", "status", *(p.name for p in search.space), search.reward,
            "job_id", "reason"]


def row(search: spec.Search, t: kind_rows.SearchTrial) -> list[str]:
    params = search_repo.params(t)
    reward = "" if t.reward is None else f"{t.reward:g}"
    return [str(t.number), t.state, *(params.get(p.name, "") for p in search.space), reward,
            t.job_id, t.reason or ""]


def table(conn: sa.Connection, project_id: str, job_id: str, *, offset: int = 0,
          limit: int | None = None) -> dict[str, Any]:
    """The search's trials, in the reference's shape."""
    _job, _s, search = search_job(conn, project_id, job_id)
    stored = search_repo.trials_of(conn, job_id)
    page = stored[offset:] if limit is None else stored[offset:offset + limit]
    return {"total": len(stored), "count": len(page), "limit": limit or len(page),
            "offset": offset, "group_by": "",
            "items": {"header": header(search), "data": [row(search, t) for t in page]}}


def one(conn: sa.Connection, project_id: str, job_id: str, trial_id: str) -> dict[str, Any]:
    _job, _s, search = search_job(conn, project_id, job_id)
    t = search_repo.trial(conn, job_id, _number(trial_id))
    return {"header": header(search), "data": [row(search, t)]}


def curves(conn: sa.Connection, project_id: str, job_id: str) -> dict[str, Any]:
    """Each trial's intermediate rewards by step (what the pruner judged it by): the
    trials' learning curves. A trial stopped early has its curve end where it stopped."""
    _job, _s, search = search_job(conn, project_id, job_id)
    out = []
    for t in search_repo.trials_of(conn, job_id):
        points = sorted(search_repo.intermediate(t).items())
        out.append({"trial_id": str(t.number), "status": t.state, "job_id": t.job_id,
                    "steps": [s for s, _ in points], "values": [v for _, v in points]})
    return {"reward": search.reward, "mode": "max" if search.maximize else "min",
            "trials": out}


def _number(trial_id: str) -> int:
    if not trial_id.isascii() or not trial_id.isdigit() or len(trial_id) > 9:
        raise search_repo.TrialNotFound(f"trial '{trial_id}' does not exist")
    return int(trial_id)


def early_stop(conn: sa.Connection, project_id: str, job_id: str, trial_id: str,
               now: int) -> str:
    """Stop a running trial by hand: its job is asked to stop at once; it ends
    `early_stopped` when its job has. The trial's number."""
    search_job(conn, project_id, job_id)
    t = search_repo.trial(conn, job_id, _number(trial_id))
    if t.state != State.RUNNING:
        raise errors.InvalidState(f"trial {t.number} is {t.state}: only a running trial "
                                  "can be stopped early")
    why = "stopped early by hand"
    search_repo.move(conn, t, State.STOPPING, now, stop_cause=trials.StopCause.BY_HAND.value,
                     reason=why, message=f"Trial {t.number} stopping: {why}")
    job = job_repo.job_by_id(conn, t.job_id)
    if job is not None and jobs.Phase(job.phase) in jobs.TERMINABLE:
        job_repo.request_terminate(conn, t.job_id, now, f"Stopped by its search: {why}")
    return str(t.number)


def stop_trial(rt: runtime.Runtime, project_id: str, job_id: str, trial_id: str,
               caller: identity.Principal, now: int) -> str:
    """`early_stop` in a transaction of its own, by a caller who may change the search's
    job. The trial's number."""
    with rt.store.begin() as conn:
        caller.may_change_job(project_id, job_repo.get_job(conn, project_id, job_id).user_name)
        return early_stop(conn, project_id, job_id, trial_id, now)


def analysis(conn: sa.Connection, project_id: str, job_id: str) -> dict[str, Any]:
    """The searched parameters by importance to the reward, most important first."""
    _job, _s, search = search_job(conn, project_id, job_id)
    from corral.kinds.search import study  # (Optuna: loaded with the first search)
    found = study.importances(search, search_repo.trials_of(conn, job_id))
    ranked = sorted(((p.name, found.get(p.name)) for p in search.space),
                    key=lambda kv: -(kv[1] or 0.0))
    return {"header": ["parameter", "importance"],
            "data": [[name, "" if v is None else f"{v:.4f}"] for name, v in ranked]}


def points(conn: sa.Connection, project_id: str, job_id: str,
           parameter: str) -> tuple[spec.Search, list[tuple[str, float]]]:
    """(the policy, each rewarded trial's value of `parameter` and its reward)."""
    _job, _s, search = search_job(conn, project_id, job_id)
    if parameter not in {p.name for p in search.space}:
        raise errors.NotFound(f"the search has no parameter '{parameter}'")
    return search, [(search_repo.params(t)[parameter], t.reward)
                    for t in search_repo.trials_of(conn, job_id)
                    if t.reward is not None and parameter in search_repo.params(t)]


def svg(search: spec.Search, parameter: str, pts: list[tuple[str, float]]) -> str:
    """A scatter plot of `parameter` (x) against the reward (y), one dot per trial."""
    w, h, pad = 480, 320, 48
    space = next(p for p in search.space if p.name == parameter)
    cats = list(space.choices)
    xs = [float(cats.index(x)) if cats else float(x) for x, _ in pts]
    ys = [y for _, y in pts]
    lo_x, hi_x = (0.0, max(len(cats) - 1, 1.0)) if cats else (space.low, space.high)
    lo_y, hi_y = (min(ys, default=0.0), max(ys, default=1.0))
    if hi_y - lo_y < 1e-12:
        lo_y, hi_y = lo_y - 0.5, hi_y + 0.5

    def sx(x: float) -> float:
        return pad + (x - lo_x) / (hi_x - lo_x or 1.0) * (w - 2 * pad)

    def sy(y: float) -> float:
        return h - pad - (y - lo_y) / (hi_y - lo_y) * (h - 2 * pad)

    dots = "".join(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="4" fill="#2f6fb0">'
                   f"<title>{html.escape(parameter)}={html.escape(raw)}: {y:g}</title>"
                   "</circle>" for (raw, y), x in zip(pts, xs, strict=True))
    ticks = "".join(f'<text x="{sx(i):.1f}" y="{h - pad + 16}" font-size="11" '
                    f'text-anchor="middle">{html.escape(c)}</text>'
                    for i, c in enumerate(cats)) if cats else (
        f'<text x="{pad}" y="{h - pad + 16}" font-size="11">{lo_x:g}</text>'
        f'<text x="{w - pad}" y="{h - pad + 16}" font-size="11" text-anchor="end">'
        f"{hi_x:g}</text>")
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
            f'viewBox="0 0 {w} {h}"><rect width="{w}" height="{h}" fill="white"/>'
            f'<line x1="{pad}" y1="{h - pad}" x2="{w - pad}" y2="{h - pad}" stroke="#555"/>'
            f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{h - pad}" stroke="#555"/>'
            f'{ticks}<text x="{pad - 6}" y="{sy(hi_y):.1f}" font-size="11" '
            f'text-anchor="end">{hi_y:g}</text><text x="{pad - 6}" y="{sy(lo_y):.1f}" '
            f'font-size="11" text-anchor="end">{lo_y:g}</text>'
            f'<text x="{w / 2}" y="{h - 8}" font-size="12" text-anchor="middle">'
            f"{html.escape(parameter)}</text>"
            f'<text x="14" y="{h / 2}" font-size="12" text-anchor="middle" '
            f'transform="rotate(-90 14 {h / 2})">{html.escape(search.reward)}</text>'
            f"{dots}</svg>")


def algorithms_list() -> dict[str, Any]:
    listed = [{"name": a.name, "description": a.description,
               "params": [{"key": p.key, "value": _default(p), "type": p.type}
                          for p in a.params]}
              for a in algorithms.ALGORITHMS.values()]
    return {"search_algo_count": len(listed), "search_algo_list": listed}


def _default(p: algorithms.Param) -> str:
    return f"{p.default:g}" if isinstance(p.default, float) else str(p.default)


def templates() -> dict[str, Any]:
    return {"yaml_templates": [{"algorithm_type_en": algorithms.TEMPLATE_TYPE,
                                "algorithm_type_zh": algorithms.TEMPLATE_TYPE_ZH,
                                "algorithm_names": list(algorithms.ALGORITHMS)}]}


def template(algorithm_type: str, algorithm_name: str) -> dict[str, Any]:
    """An auto_search policy for the algorithm, with its defaults, as YAML."""
    algorithm = algorithms.ALGORITHMS.get(algorithm_name)
    if algorithm_type != algorithms.TEMPLATE_TYPE or algorithm is None:
        raise errors.NotFound(f"no YAML template '{algorithm_type}/{algorithm_name}'")
    policy = {"auto_search": {
        "reward_attrs": [{"name": "accuracy", "mode": "max",
                          "regex": "accuracy=([0-9.]+)"}],
        "search_params": [
            {"name": "lr", "param_type": "continuous", "lower_bound": "0.0001",
             "upper_bound": "0.1"},
            {"name": "width", "param_type": "discrete", "discrete_values": ["16", "32", "64"]}],
        "algo_configs": [{"name": algorithm.name, "params": [
            {"key": p.key, "value": _default(p), "type": p.type} for p in algorithm.params]}]}}
    return {"file_name": f"{algorithm.name}.yaml",
            "content": yaml.safe_dump(policy, sort_keys=False, allow_unicode=True)}
