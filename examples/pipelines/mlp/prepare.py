"""Make the data set: two interleaved spirals, some points kept back for the evaluation.

    python prepare.py --points=1500 --data_url=/tmp/data

Writes `data.npz` (x, y: what the trainer reads) and `test.npz` (points it never sees).
"""

from __future__ import annotations

import argparse
import pathlib

import numpy as np


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--points", type=int, default=1500)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--data_url", required=True)
    args, _ = p.parse_known_args()
    rng = np.random.default_rng(args.seed)
    half = args.points // 2
    t = np.sqrt(rng.uniform(0, 1, half)) * 4 * np.pi
    arm = np.stack([t * np.cos(t), t * np.sin(t)], axis=1) / (4 * np.pi)
    x = np.concatenate([arm, -arm]) + rng.normal(0, 0.04, (2 * half, 2))
    y = np.concatenate([np.zeros(half, dtype=np.int64), np.ones(half, dtype=np.int64)])
    order = rng.permutation(len(y))
    test, fit = order[: len(y) // 5], order[len(y) // 5 :]
    out = pathlib.Path(args.data_url)
    out.mkdir(parents=True, exist_ok=True)
    np.savez(out / "data.npz", x=x[fit], y=y[fit])
    np.savez(out / "test.npz", x=x[test], y=y[test])
    print(f"{len(fit)} points to train on, {len(test)} kept for the evaluation", flush=True)
    print(f"corral:metrics points={len(fit)} test_points={len(test)}", flush=True)


if __name__ == "__main__":
    main()
