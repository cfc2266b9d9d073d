"""What the search tests share: a trial script, a search body, a live server on a
database, and reading a search's trials."""

from __future__ import annotations

import pathlib
from typing import Any

import sqlalchemy as sa

from corral.store import kind_tables
from tests import conftest
from tests import factories as f

#: a trial: `steps` steps of a made-up accuracy that peaks at lr=0.01 and grows with width;
#: one line per run appended to $COUNT_FILE (outside corral: each start is counted)
TRIAL = r"""
import argparse, math, os, sys, time
p = argparse.ArgumentParser()
p.add_argument("--lr", type=float, default=0.1)
p.add_argument("--width", type=int, default=8)
p.add_argument("--steps", type=int, default=4)
p.add_argument("--pause", type=float, default=0.05)
p.add_argument("--fail_above", type=float, default=10.0)
p.add_argument("--train_url", default="")
p.add_argument("--use_metrics", default="")
a, _ = p.parse_known_args()
if a.train_url:
    os.makedirs(a.train_url, exist_ok=True)
    with open(os.path.join(a.train_url, "params.txt"), "w") as fh:
        fh.write(f"{a.lr} {a.width}\n")
count = os.environ.get("COUNT_FILE")
if count:
    with open(count, "a") as fh:
        fh.write(f"{os.environ['CORRAL_JOB_ID']} {a.lr} {a.width}\n")
if a.lr > a.fail_above:
    sys.exit(3)
best = 1.0 - abs(math.log10(a.lr) + 2) / 4 + a.width / 1000
for step in range(1, a.steps + 1):
    if a.use_metrics:
        from corral import job
        job.log_metrics({"accuracy": best * step / a.steps}, step=step)
    else:
        print(f"step {step} accuracy={best * step / a.steps:.4f};", flush=True)
    time.sleep(a.pause)
"""


def code(root: pathlib.Path) -> pathlib.Path:
    return f.write_code(root, TRIAL)


def policy(algorithm: str = "random_search", *, samples: int = 4, parallel: int = 2,
           regex: str = r"accuracy=([0-9.]+);", **params: Any) -> dict[str, Any]:
    algo = [{"key": "num_samples", "value": str(samples), "type": "int"},
            {"key": "max_concurrent", "value": str(parallel), "type": "int"}]
    algo += [{"key": k, "value": str(v), "type": "int"} for k, v in params.items()]
    return {"reward_attrs": [{"name": "accuracy", "mode": "max", "regex": regex}],
            "search_params": [
                {"name": "lr", "param_type": "continuous", "lower_bound": "0.0001",
                 "upper_bound": "0.1"},
                {"name": "width", "param_type": "discrete",
                 "discrete_values": ["8", "16", "32"]}],
            "algo_configs": [{"name": algorithm, "params": algo}]}


def body(code_dir: pathlib.Path, auto_search: dict[str, Any], *,
         outputs: dict[str, str] | None = None, **parameters: Any) -> dict[str, Any]:
    b = f.make_job(code_dir=code_dir, parameters=parameters or None, outputs=outputs)
    b["algorithm"]["policies"] = {"auto_search": auto_search}
    return b


def start(home: pathlib.Path, db_url: str, **overrides: Any) -> conftest.Live:
    return conftest.start_live(home, db_url=db_url, **overrides)


def trials(live: conftest.Live, job_id: str) -> list[Any]:
    T = kind_tables.search_trials
    with live.embedded.platform.store.read() as conn:
        return list(conn.execute(sa.select(T).where(T.c.search_id == job_id)
                                 .order_by(T.c.number)))
