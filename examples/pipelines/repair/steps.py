"""The three steps of the repair example, with the standard library only.

    python steps.py --step=fetch --raw_url=DIR
    python steps.py --step=validate --raw_url=DIR --clean_url=DIR --max_bad_rows=0
    python steps.py --step=train --clean_url=DIR --model_url=DIR

`fetch` writes 100 rows, 3 of them bad; `validate` fails when more rows are bad than
`max_bad_rows`, else keeps the good ones; `train` fits a line to them.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys


def fetch(args: argparse.Namespace) -> int:
    rows = [f"{i},{2 * i + 1}" for i in range(100)]
    for bad in (17, 42, 88):
        rows[bad] = f"{bad},n/a"
    out = pathlib.Path(args.raw_url)
    out.mkdir(parents=True, exist_ok=True)
    (out / "rows.csv").write_text("\n".join(rows) + "\n")
    print(f"fetched {len(rows)} rows", flush=True)
    print(f"corral:metrics rows={len(rows)}", flush=True)
    return 0


def validate(args: argparse.Namespace) -> int:
    good, bad = [], []
    for line in (pathlib.Path(args.raw_url) / "rows.csv").read_text().splitlines():
        _x, y = line.split(",")
        (good if y.strip().lstrip("-").isdigit() else bad).append(line)
    print(f"corral:metrics bad_rows={len(bad)}", flush=True)
    if len(bad) > args.max_bad_rows:
        print(f"{len(bad)} bad rows, more than max_bad_rows={args.max_bad_rows}: "
              f"{', '.join(bad)}", flush=True)
        return 1
    out = pathlib.Path(args.clean_url)
    out.mkdir(parents=True, exist_ok=True)
    (out / "rows.csv").write_text("\n".join(good) + "\n")
    print(f"kept {len(good)} rows, dropped {len(bad)}", flush=True)
    return 0


def train(args: argparse.Namespace) -> int:
    points = [tuple(map(float, line.split(",")))
              for line in (pathlib.Path(args.clean_url) / "rows.csv").read_text().split()]
    n = len(points)
    mx, my = sum(p[0] for p in points) / n, sum(p[1] for p in points) / n
    slope = (sum((x - mx) * (y - my) for x, y in points)
             / sum((x - mx) ** 2 for x, _ in points))
    model = {"slope": slope, "intercept": my - slope * mx, "rows": n}
    out = pathlib.Path(args.model_url)
    out.mkdir(parents=True, exist_ok=True)
    (out / "model.json").write_text(json.dumps(model) + "\n")
    print(f"fitted y = {model['slope']:.2f} x + {model['intercept']:.2f} on {n} rows",
          flush=True)
    print(f"corral:metrics slope={slope}", flush=True)
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--step", choices=("fetch", "validate", "train"), required=True)
    p.add_argument("--max_bad_rows", type=int, default=0)
    for channel in ("raw_url", "clean_url", "model_url"):
        p.add_argument(f"--{channel}")
    args, _ = p.parse_known_args()
    return {"fetch": fetch, "validate": validate, "train": train}[args.step](args)


if __name__ == "__main__":
    sys.exit(main())
