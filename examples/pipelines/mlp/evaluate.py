"""Evaluate two trained MLPs on the points kept back, and keep the better one.

    python evaluate.py --data_url=DIR --a_url=DIR --b_url=DIR --best_url=DIR

Reports `a_accuracy`, `b_accuracy` and `best_accuracy`, and copies the better model's
files into `best_url` with `chosen.json` saying which it was.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import shutil

import numpy as np


def accuracy(model_dir: pathlib.Path, x: np.ndarray, y: np.ndarray) -> float:
    with np.load(model_dir / "model.npz") as m:
        h = np.maximum(0, x @ m["w1"] + m["b1"])
        logits = h @ m["w2"] + m["b2"]
    return float((logits.argmax(axis=1) == y).mean())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name in ("data_url", "a_url", "b_url", "best_url"):
        p.add_argument(f"--{name}", required=True)
    args, _ = p.parse_known_args()
    with np.load(pathlib.Path(args.data_url) / "test.npz") as test:
        x, y = test["x"], test["y"]
    scores = {v: accuracy(pathlib.Path(getattr(args, f"{v}_url")), x, y) for v in ("a", "b")}
    best = max(scores, key=lambda v: scores[v])
    out = pathlib.Path(args.best_url)
    out.mkdir(parents=True, exist_ok=True)
    for f in ("model.npz", "metrics.json"):
        shutil.copy2(pathlib.Path(getattr(args, f"{best}_url")) / f, out / f)
    (out / "chosen.json").write_text(json.dumps({"variant": best, **scores}) + "\n")
    print(f"accuracy on {len(y)} unseen points: a={scores['a']:.3f} b={scores['b']:.3f}; "
          f"keeping {best}", flush=True)
    print(f"corral:metrics a_accuracy={scores['a']} b_accuracy={scores['b']} "
          f"best_accuracy={scores[best]}", flush=True)


if __name__ == "__main__":
    main()
