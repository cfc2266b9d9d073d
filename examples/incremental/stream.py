"""A stream of labelled points whose boundary drifts: the data of the incremental example.

Each sample is a CSV row `x1,x2,label`: a point in the unit square around the origin and
which side of a line through the origin, at `angle` degrees, it lies on. As the angle
changes, a model trained on older points gets newer ones wrong.

    python stream.py --angle 60 --count 250 --seed 2 >> stream.csv
"""

from __future__ import annotations

import argparse
import math
import random

HEADER = "x1,x2,label"


def points(angle: float, count: int, seed: int) -> list[str]:
    """`count` rows of points labelled by the line at `angle` degrees."""
    rng = random.Random(seed)
    nx, ny = -math.sin(math.radians(angle)), math.cos(math.radians(angle))
    rows = []
    for _ in range(count):
        x1, x2 = rng.uniform(-1, 1), rng.uniform(-1, 1)
        rows.append(f"{x1:.4f},{x2:.4f},{int(nx * x1 + ny * x2 > 0)}")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--angle", type=float, default=0.0)
    parser.add_argument("--count", type=int, default=250)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--header", action="store_true", help="print the CSV header first")
    args = parser.parse_args()
    if args.header:
        print(HEADER)
    print("\n".join(points(args.angle, args.count, args.seed)))


if __name__ == "__main__":
    main()
