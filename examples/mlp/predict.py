"""Run a trained MLP (`model.npz` from train.py) on data: an inference or evaluation job.

corral passes the registered model's folder as `--model_url`; the data come from an input
channel (`--data_url` with a data.npz) or are generated like train.py's spirals. The
predicted labels go to the output channel (`--result_url`) as predictions.npy, and the
accuracy against the labels is reported as a training metric, so the same script serves
an evaluation job.

    python predict.py --model_url=/tmp/mlp-out --result_url=/tmp/pred
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

import numpy as np
import train  # the example's own module, beside this file


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model_url", required=True, help="folder holding model.npz")
    p.add_argument("--result_url", default="./predictions", help="output channel")
    p.add_argument("--data_url", default=None, help="input channel holding a data.npz")
    p.add_argument("--points", type=int, default=1000)
    p.add_argument("--seed", type=int, default=1)
    args, _unknown = p.parse_known_args(argv)
    with np.load(pathlib.Path(args.model_url) / "model.npz") as model:
        params = {k: model[k] for k in model.files}
    rng = np.random.default_rng(args.seed)
    x, y = train.load_data(argparse.Namespace(data_url=args.data_url, points=args.points), rng)
    _, prob = train.forward(params, x)
    predicted = prob.argmax(axis=1)
    out = pathlib.Path(args.result_url)
    out.mkdir(parents=True, exist_ok=True)
    np.save(out / "predictions.npy", predicted)
    accuracy = float((predicted == y).mean())
    (out / "summary.json").write_text(json.dumps({"points": len(y), "accuracy": accuracy}))
    train.log_metrics({"accuracy": accuracy}, step=0)
    print(f"predicted {len(y)} points: accuracy={accuracy:.4f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
