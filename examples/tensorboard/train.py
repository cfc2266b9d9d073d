"""A small training run that writes TensorBoard summaries (numpy and TensorBoard only).

It fits a line to noisy points by gradient descent and writes `loss` and `slope` every
step with TensorBoard's own writer, into CORRAL_SUMMARY_DIR (the folder the job's
`algorithm.summary` names, in its output channel), or `--summaries=DIR` when run alone:

    python examples/tensorboard/train.py --summaries=/tmp/tb && tensorboard --logdir /tmp/tb
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from tensorboard import summary


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--pause", type=float, default=0.05, help="seconds between steps")
    p.add_argument("--summaries", default=os.environ.get("CORRAL_SUMMARY_DIR", "summaries"))
    args, _unknown = p.parse_known_args()  # (the output channel's --train_url=...)

    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, 200)
    y = 3.0 * x + 0.5 + rng.normal(0, 0.1, x.size)
    slope = intercept = 0.0
    writer = summary.Writer(summary.DirectoryOutput(args.summaries))
    for step in range(args.steps):
        error = slope * x + intercept - y
        loss = float(np.mean(error ** 2))
        slope -= args.lr * float(np.mean(2 * error * x))
        intercept -= args.lr * float(np.mean(2 * error))
        writer.add_scalar("loss", loss, step=step)
        writer.add_scalar("slope", slope, step=step)
        writer.flush()  # TensorBoard shows each step as it is written
        if step % 10 == 0:
            print(f"step {step}: loss={loss:.4f} slope={slope:.3f}", flush=True)
        time.sleep(args.pause)
    writer.close()
    print(f"final: loss={loss:.4f} slope={slope:.3f} intercept={intercept:.3f}")


if __name__ == "__main__":
    main()
