"""A small training job that keeps a checkpoint and carries on from it after a fault.

It fits a line (y = 3x + 1) by gradient descent, one epoch a fraction of a second, and
writes `checkpoint.json` after every epoch into its checkpoint folder: the one corral
names in `CORRAL_CHECKPOINT_DIR` (the job's `spec.fault_tolerance.checkpoint` channel),
else `--train_url`. An attempt after the first (`CORRAL_ATTEMPT` above 1) starts from the
epoch after the one its checkpoint ended, and says so:

    attempt 2: resuming after epoch 5 from .../checkpoint.json

To show what corral does with faults, the first attempt can be made to go wrong:
`--crash_at_epoch=N` raises an error after epoch N (exit 1), `--hang_at_epoch=N` waits
for ever there, silent and idle. A bad setting (`--lr` not above 0) exits with 3 at once:
a mistake that no retry mends. Needs only Python. Ends with `model.json` in --train_url.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import random
import sys
import threading
import time

#: the exit status of a mistake in the job's settings (no_retry in no-retry.yaml)
BAD_CONFIG = 3
CHECKPOINT = "checkpoint.json"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--seconds_per_epoch", type=float, default=0.3)
    p.add_argument("--crash_at_epoch", type=int, default=0)
    p.add_argument("--hang_at_epoch", type=int, default=0)
    p.add_argument("--train_url", default="output")
    args, _unknown = p.parse_known_args(argv)  # ModelArts passes more than this needs
    return args


def load(where: pathlib.Path) -> tuple[int, float, float]:
    """The epoch the checkpoint in `where` ended, and its weights; (0, 0, 0) without one."""
    try:
        saved = json.loads((where / CHECKPOINT).read_text())
    except FileNotFoundError:
        return 0, 0.0, 0.0
    return int(saved["epoch"]), float(saved["w"]), float(saved["b"])


def save(where: pathlib.Path, epoch: int, w: float, b: float) -> None:
    where.mkdir(parents=True, exist_ok=True)
    part = where / (CHECKPOINT + ".part")
    part.write_text(json.dumps({"epoch": epoch, "w": w, "b": b}))
    part.replace(where / CHECKPOINT)  # a crash never leaves half a checkpoint


def epoch_of(w: float, b: float, lr: float, rng: random.Random) -> tuple[float, float, float]:
    """One pass of gradient descent over 64 noisy points of y = 3x + 1; (w, b, loss)."""
    xs = [rng.uniform(-1, 1) for _ in range(64)]
    ys = [3 * x + 1 + rng.gauss(0, 0.05) for x in xs]
    for x, y in zip(xs, ys, strict=True):
        err = w * x + b - y
        w, b = w - lr * err * x, b - lr * err
    loss = sum((w * x + b - y) ** 2 for x, y in zip(xs, ys, strict=True)) / len(xs)
    return w, b, loss


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.lr <= 0:
        print(f"bad configuration: --lr must be above 0, not {args.lr}", file=sys.stderr)
        return BAD_CONFIG
    attempt = int(os.environ.get("CORRAL_ATTEMPT") or "1")
    ckpt = pathlib.Path(os.environ.get("CORRAL_CHECKPOINT_DIR") or args.train_url)
    done, w, b = load(ckpt) if attempt > 1 else (0, 0.0, 0.0)
    if done:
        print(f"attempt {attempt}: resuming after epoch {done} from {ckpt / CHECKPOINT}",
              flush=True)
    else:
        print(f"attempt {attempt}: starting at epoch 1", flush=True)
    for epoch in range(done + 1, args.epochs + 1):
        w, b, loss = epoch_of(w, b, args.lr, random.Random(epoch))
        time.sleep(args.seconds_per_epoch)
        save(ckpt, epoch, w, b)
        print(f"epoch {epoch}/{args.epochs} loss={loss:.4f} (checkpoint saved)", flush=True)
        if attempt == 1 and epoch == args.crash_at_epoch:
            raise RuntimeError(f"simulated fault after epoch {epoch}: the worker died")
        if attempt == 1 and epoch == args.hang_at_epoch:
            print("waiting for a peer that never answers ...", flush=True)
            threading.Event().wait()  # silent and idle: a hang
    out = pathlib.Path(args.train_url)
    out.mkdir(parents=True, exist_ok=True)
    (out / "model.json").write_text(json.dumps({"w": w, "b": b}))
    print(f"done: y = {w:.2f}x + {b:.2f} after {args.epochs} epochs", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
