"""What the workers share: the model (a logistic regression on two features), the data."""

from __future__ import annotations

import csv
import json
import math
import pathlib
import random

Weights = list[float]


def load_rows(index: str) -> list[tuple[float, float, int]]:
    """The samples of an index file (CSV with a header: x1,x2,label)."""
    with open(index, newline="") as fh:
        return [(float(r["x1"]), float(r["x2"]), int(r["label"])) for r in csv.DictReader(fh)]


def predict(w: Weights, x1: float, x2: float) -> float:
    z = w[0] * x1 + w[1] * x2 + w[2]
    return 1 / (1 + math.exp(-max(min(z, 30), -30)))


def accuracy(w: Weights, rows: list[tuple[float, float, int]]) -> float:
    right = sum(int(predict(w, x1, x2) > 0.5) == y for x1, x2, y in rows)
    return right / len(rows) if rows else 0.0


def train(w: Weights, rows: list[tuple[float, float, int]], epochs: int) -> Weights:
    """Plain SGD from `w`, in a fixed order (so the example runs the same every time)."""
    w = list(w)
    order = list(rows)
    rng = random.Random(0)
    for _ in range(epochs):
        rng.shuffle(order)
        for x1, x2, y in order:
            g = predict(w, x1, x2) - y
            w = [w[0] - 0.5 * g * x1, w[1] - 0.5 * g * x2, w[2] - 0.5 * g]
    return w


def read(folder: str | pathlib.Path) -> Weights:
    return list(json.loads((pathlib.Path(folder) / "model.json").read_text())["w"])


def write(folder: str | pathlib.Path, w: Weights) -> None:
    out = pathlib.Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    (out / "model.json").write_text(json.dumps({"w": w}))
