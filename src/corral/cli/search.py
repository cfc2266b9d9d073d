"""`corral search ...`: hyperparameter searches (show, trials, stop-trial, algorithms).

A search is a training job with `policies.auto_search` (submitted with `corral submit`);
JOB is its id or name. `show --watch` follows it live: each trial's change as it happens,
and the best trial so far.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import click

from corral.cli import render
from corral.sdk import client
from corral.sdk import search as search_api

if TYPE_CHECKING:
    from corral.cli.state import State

_STYLE = {"completed": "green", "running": "cyan", "stopping": "yellow", "failed": "red",
          "pruned": "dim", "early_stopped": "dim", "stopped": "yellow"}
_ENDED = {"Completed", "Failed", "Terminated", "Abnormal"}


@click.group(short_help="Hyperparameter searches and their trials.")
def search() -> None:
    """Hyperparameter searches: training jobs with policies.auto_search, run as trials
    (docs/search.md)."""


def _policy(job: dict[str, Any]) -> dict[str, Any]:
    found = ((job.get("algorithm") or {}).get("policies") or {}).get("auto_search")
    if not found:
        raise render.Failure(f"job {job['metadata']['name']} is not a hyperparameter search")
    return dict(found)


def best(job: dict[str, Any], table: dict[str, Any]) -> list[str] | None:
    """The best completed trial's row so far, by the search's reward and mode."""
    header, rows = table["items"]["header"], table["items"]["data"]
    reward = header.index(_policy(job)["reward_attrs"][0]["name"])
    done = [r for r in rows if r[1] == "completed" and r[reward] != ""]
    if not done:
        return None
    sign = 1.0 if _policy(job)["reward_attrs"][0].get("mode", "max") == "max" else -1.0
    return max(done, key=lambda r: sign * float(r[reward]))


def _trials_table(table: dict[str, Any], top: list[str] | None) -> Any:
    header = table["items"]["header"]
    out = render.table(*(h.upper() for h in header if h != "reason"), "REASON")
    for r in table["items"]["data"]:
        cells = [render.esc(c) for c in r]
        style = _STYLE.get(r[1], "")
        cells[1] = f"[{style}]{cells[1]}[/]" if style else cells[1]
        if top is not None and r[0] == top[0]:
            cells[0] = f"[bold]{cells[0]} *[/]"
        out.add_row(*cells[:-1], f"[dim]{cells[-1]}[/]")
    return out


def _summary(job: dict[str, Any], table: dict[str, Any]) -> str:
    algo = _policy(job)["algo_configs"][0]["name"]
    top = best(job, table)
    header = table["items"]["header"]
    n = len(header) - 5  # trial_id, status, the parameters, the reward, job_id, reason
    said = "none yet" if top is None else (
        f"trial {top[0]}: {header[2 + n]}={top[2 + n]} ("
        + ", ".join(f"{h}={v}" for h, v in zip(header[2:2 + n], top[2:2 + n],
                                                strict=True)) + ")")
    return (f"[bold]{render.esc(job['metadata']['name'])}[/] "
            f"{render.phase_label(job['status'])}  {algo}, {table['total']} trial(s)  "
            f"best: {render.esc(said)}")


@search.command(short_help="A search: its phase, its trials and the best so far.")
@click.argument("job")
@click.option("--watch", is_flag=True, help="follow it live until it ends; exit 1 "
              "unless it completed")
@render.json_option()
@click.pass_obj
def show(state: State, job: str, watch: bool, as_json: bool) -> None:
    """Show search JOB: its phase, algorithm, best trial so far and every trial."""
    api = state.connect()
    job_id = state.job_id(job)
    if watch:
        _watch(state, api, job_id)
        return
    found, table = api.get_job(job_id), search_api.trials(api, job_id)
    if as_json:
        render.print_json({"job": found, "trials": table,
                           "importance": search_api.importance(api, job_id)})
        return
    state.out.print(_summary(found, table))
    state.out.print(_trials_table(table, best(found, table)))


def _watch(state: State, api: client.Client, job_id: str, poll: float = 0.5) -> None:
    """Print each trial's changes and a new best as they happen, until the search ends."""
    seen: dict[str, str] = {}
    top: list[str] | None = None
    try:
        while True:
            found, table = api.get_job(job_id), search_api.trials(api, job_id)
            now = render.time_ms(int(time.time() * 1000))
            for r in table["items"]["data"]:
                if seen.get(r[0]) != r[1]:
                    seen[r[0]] = r[1]
                    state.out.print(f"{now}  trial {r[0]:<4} {r[1]:<14} "
                                    f"{render.esc(' '.join(r[2:-2]))}  [dim]{r[-1]}[/]")
            if (new := best(found, table)) is not None and new != top:
                top = new
                state.out.print(f"{now}  [bold]best so far: trial {top[0]}[/]")
            if found["status"]["phase"] in _ENDED:
                break
            time.sleep(poll)
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    state.out.print(_summary(found, table))
    if found["status"]["phase"] != "Completed":
        raise render.Failure(f"search {found['metadata']['name']} ended "
                             f"{found['status']['phase']}")


@search.command(short_help="A search's trials, as a table.")
@click.argument("job")
@render.json_option()
@click.pass_obj
def trials(state: State, job: str, as_json: bool) -> None:
    """List search JOB's trials: state, parameters, reward, job id and why it ended."""
    api = state.connect()
    job_id = state.job_id(job)
    table = search_api.trials(api, job_id)
    if as_json:
        render.print_json(table)
        return
    state.out.print(_trials_table(table, best(api.get_job(job_id), table)))


@search.command(name="stop-trial", short_help="Stop a running trial early.")
@click.argument("job")
@click.argument("trial")
@render.json_option()
@click.pass_obj
def stop_trial(state: State, job: str, trial: str, as_json: bool) -> None:
    """Stop trial TRIAL (its number) of search JOB now; the search goes on."""
    found = search_api.early_stop(state.connect(), state.job_id(job), trial)
    if as_json:
        render.print_json(found)
        return
    state.out.print(f"trial {found['earlystop_trial']} stopping")


@search.command(short_help="The search algorithms and their params.")
@render.json_option()
@click.pass_obj
def algorithms(state: State, as_json: bool) -> None:
    """List the search algorithms, each with its params and their defaults."""
    found = search_api.algorithms(state.connect())
    if as_json:
        render.print_json(found)
        return
    out = render.table("ALGORITHM", "PARAMS", "DESCRIPTION")
    for a in found["search_algo_list"]:
        out.add_row(a["name"], " ".join(f"{p['key']}={p['value']}" for p in a["params"]),
                    render.esc(a["description"]))
    state.out.print(out)


COMMANDS = (search,)
