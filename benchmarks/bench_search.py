"""Hyperparameter search: does early stopping pay, and how soon does a free slot get its
next trial.

1. Early stopping pays. The search example (the MLP of examples/mlp over its learning rate
   and hidden units) runs twice on the same server, with the same TPE sampler and seed and
   the same number of trials: once with every trial run to its end (`tpe_search`), once
   with ASHA stopping the trials that fall behind (`asha_search`). The issue's target: the
   early-stopping search's best reward within 1% of the other's, in at most 50% of its
   total trial time (the sum of its trials' run times).
2. Trial handoff. A search of quick trials, one at a time: from one trial's job ending to
   the next trial's job running. The issue's target: p99 under 1 s. The baseline, in the
   same run: a client that submits the next job the moment it sees the last end (a watch
   on the job), as a script driving plain jobs would.

Nothing here asserts: each target is printed as PASS or MISS for a person to read (see
README.md in this directory). It starts `corral server` as its own process with default
settings, as bench_incremental.py does.

    python benchmarks/bench_search.py [--trials 8] [--handoffs 30] [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import tempfile
from typing import Any

import bench_incremental as bench

from corral.sdk import client
from corral.sdk import search as search_api

EXAMPLE = pathlib.Path(__file__).resolve().parents[1] / "examples"
QUICK = 'print("reward=0.5", flush=True)\n'


def policy(algorithm: str, trials: int, parallel: int, **extra: int) -> dict[str, Any]:
    params = {"num_samples": trials, "max_concurrent": parallel, "seed": 1, **extra}
    return {"reward_attrs": [{"name": "accuracy", "mode": "max",
                              "regex": "accuracy=([0-9.]+)"}],
            "search_params": [
                {"name": "lr", "param_type": "continuous", "lower_bound": "0.0005",
                 "upper_bound": "0.05"},
                {"name": "hidden", "param_type": "discrete",
                 "discrete_values": ["4", "8", "16", "32", "64"]}],
            "algo_configs": [{"name": algorithm, "params": [
                {"key": k, "value": str(v), "type": "int"} for k, v in params.items()]}]}


def run_search(api: client.Client, name: str, algorithm: dict[str, Any],
               alg: dict[str, Any]) -> str:
    body = {"metadata": {"name": name}, "algorithm": {**alg, "policies": {
        "auto_search": algorithm}}}
    job_id = str(api.create_job(body)["metadata"]["id"])
    bench.wait(f"search {name}", lambda: api.get_job(job_id)["status"]["phase"]
               in client.TERMINAL, timeout=900)
    return job_id


def trial_jobs(api: client.Client, job_id: str) -> list[tuple[list[str], dict[str, Any]]]:
    """(each trial's row, its job), in trial order."""
    table = search_api.trials(api, job_id)["items"]
    at = table["header"].index("job_id")
    return [(row, api.get_job(row[at])) for row in table["data"]]


def early_stopping(api: client.Client, work: pathlib.Path, trials: int,
                   epochs: int) -> dict[str, Any]:
    alg = {"code_dir": str(EXAMPLE / "mlp"), "boot_file": "train.py",
           "parameters": [{"name": "epochs", "value": str(epochs)}],
           "outputs": [{"name": "train_url", "remote": {"obs": {"obs_url": str(work)}}}]}
    out: dict[str, Any] = {}
    for label, algorithm in (("to_the_end", policy("tpe_search", trials, 2)),
                             ("early_stopping", policy("asha_search", trials, 2,
                                                       min_resource=epochs // 5))):
        job_id = run_search(api, f"bench-{label}".replace("_", "-"), algorithm, {
            **alg, "outputs": [{"name": "train_url", "remote": {"obs": {
                "obs_url": str(work / label)}}}]})
        rows = trial_jobs(api, job_id)
        reward = search_api.trials(api, job_id)["items"]["header"].index("accuracy")
        done = [float(r[reward]) for r, _j in rows if r[1] == "completed" and r[reward]]
        out[label] = {"best": max(done, default=0.0),
                      "trial_time_s": sum(j["status"]["duration"] for _r, j in rows) / 1000,
                      "states": [r[1] for r, _j in rows]}
        bench.log(f"{label}: best {out[label]['best']:.4f}, "
                  f"{out[label]['trial_time_s']:.1f} s of trials")
    return out


def handoffs(api: client.Client, work: pathlib.Path, n: int) -> dict[str, list[float]]:
    code = work / "quick"
    code.mkdir()
    (code / "train.py").write_text(QUICK)
    alg = {"code_dir": str(code), "boot_file": "train.py"}
    quick = policy("random_search", n, 1)
    quick["reward_attrs"][0].update(name="reward", regex="reward=([0-9.]+)")
    job_id = run_search(api, "bench-handoff", quick, alg)
    jobs = [j for _r, j in trial_jobs(api, job_id)]
    search = _gaps(jobs)
    plain: list[dict[str, Any]] = []
    for i in range(n):  # the baseline: the next job submitted once the last is seen ending
        made = api.create_job({"metadata": {"name": f"bench-plain-{i}"}, "algorithm": alg})
        plain.append(api.get_job(made["metadata"]["id"], watch=[
            "Creating", "Pending", "Running", "Terminating"], timeout=60))
    return {"search": search, "client_resubmits": _gaps(plain)}


def _gaps(jobs: list[dict[str, Any]]) -> list[float]:
    """Seconds from each job's end to the next one's start."""
    ends = [j["status"]["start_time"] + j["status"]["duration"] for j in jobs]
    return [(b["status"]["start_time"] - end) / 1000 for end, b in zip(ends, jobs[1:],
                                                                      strict=False)]


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]


def report(stop: dict[str, Any], hand: dict[str, list[float]]) -> None:
    full, early = stop["to_the_end"], stop["early_stopping"]
    reward_ratio = early["best"] / full["best"] if full["best"] else 0.0
    time_ratio = early["trial_time_s"] / full["trial_time_s"]
    print("early stopping (same sampler, seed and number of trials)")
    print(f"  {'':16} {'best reward':>12} {'trial time':>12}  trials")
    for label, row in (("to the end", full), ("ASHA", early)):
        states = ", ".join(f"{s} {row['states'].count(s)}" for s in sorted(set(row["states"])))
        print(f"  {label:16} {row['best']:12.4f} {row['trial_time_s']:11.1f}s  {states}")
    ok = reward_ratio >= 0.99 and time_ratio <= 0.5
    print(f"  ASHA/to the end: reward {reward_ratio:.3f}, time {time_ratio:.2f}   target: "
          f"reward >= 0.99 in time <= 0.50: {'PASS' if ok else 'MISS'}")
    print("trial handoff (one ends -> the next runs, one slot)")
    for label, gaps in (("search", hand["search"]),
                        ("client resubmits", hand["client_resubmits"])):
        print(f"  {label:16} p50 {statistics.median(gaps):.3f}s  p99 {p99(gaps):.3f}s  "
              f"max {max(gaps):.3f}s  ({len(gaps)} handoffs)")
    print(f"  target: search p99 < 1 s: {'PASS' if p99(hand['search']) < 1 else 'MISS'}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=8)
    p.add_argument("--epochs", type=int, default=150)
    p.add_argument("--handoffs", type=int, default=30)
    p.add_argument("--quick", action="store_true", help="4 trials of 60 epochs, 6 handoffs")
    p.add_argument("--json", type=pathlib.Path)
    args = p.parse_args()
    if args.quick:
        args.trials, args.epochs, args.handoffs = 4, 60, 6
    with tempfile.TemporaryDirectory(prefix="bench-search-") as tmp:
        parent = pathlib.Path(tmp)
        work = parent / "work"
        work.mkdir()
        with bench.server(parent) as api:
            stop = early_stopping(api, work, args.trials, args.epochs)
            hand = handoffs(api, work, args.handoffs + 1)
    report(stop, hand)
    if args.json:
        args.json.write_text(json.dumps({"early_stopping": stop, "handoff": hand}, indent=1))


if __name__ == "__main__":
    main()
