"""Train a small two-layer MLP on two interleaved spirals, with numpy only.

A real (if tiny) training job for corral's demo and tests: it reads its hyperparameters and
channels the way ModelArts passes them (`--name=value`, one `--<channel>=<dir>` per input or
output), prints progress as it goes, and saves the trained weights into the output channel.

    python train.py --epochs=300 --train_url=/tmp/out

Progress is also reported as training metrics (loss, accuracy per epoch) through
`corral.job.log_metrics`, or as `corral:metrics` lines where corral cannot be imported.
A checkpoint is written every few epochs (`--checkpoint_every`) to the job's checkpoint
folder (`CORRAL_CHECKPOINT_DIR`, which corral sets when the job names a checkpoint
channel) or else to the output channel. Training continues from the latest one when corral
restarts the job after a fault (`CORRAL_ATTEMPT` above 1), in a corral version created
with `resume`, or when run again with `--resume=true`.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import time

import numpy as np

#: the model: weights and biases of both layers by name
Params = dict[str, np.ndarray]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=300)
    p.add_argument("--lr", type=float, default=0.005, help="Adam step size")
    p.add_argument("--hidden", type=int, default=64, help="units in the hidden layer")
    p.add_argument("--batch_size", type=int, default=8)
    p.add_argument("--points", type=int, default=2000, help="size of the generated data set")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log_every", type=int, default=0, help="epochs between lines (0: ~10)")
    p.add_argument("--checkpoint_every", type=int, default=0,
                   help="epochs between checkpoints (0: with each progress line)")
    p.add_argument("--train_url", default="./output", help="output channel: model.npz goes here")
    p.add_argument("--data_url", default=None, help="input channel holding a data.npz (x, y)")
    p.add_argument("--resume", default="false",
                   help="true: continue from the checkpoint in train_url, if there is one")
    # The platform may pass channels and settings this script does not know; ignore them.
    args, unknown = p.parse_known_args(argv)
    if unknown:
        print(f"ignoring arguments: {' '.join(unknown)}", flush=True)
    return args


def spirals(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Two noisy interleaved spirals: not linearly separable, easy for a small MLP."""
    half = n // 2
    t = np.sqrt(rng.uniform(0, 1, half)) * 4 * np.pi
    arm = np.stack([t * np.cos(t), t * np.sin(t)], axis=1) / (4 * np.pi)
    x = np.concatenate([arm, -arm]) + rng.normal(0, 0.04, (2 * half, 2))
    y = np.concatenate([np.zeros(half, dtype=np.int64), np.ones(half, dtype=np.int64)])
    return x, y


def load_data(args: argparse.Namespace, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    if args.data_url:
        path = pathlib.Path(args.data_url) / "data.npz"
        if path.is_file():
            with np.load(path) as data:
                print(f"data: {path}", flush=True)
                return data["x"].astype(np.float64), data["y"].astype(np.int64)
        print(f"data: no data.npz in {args.data_url}, generating spirals", flush=True)
    return spirals(args.points, rng)


def init_params(n_in: int, hidden: int, n_out: int, rng: np.random.Generator) -> Params:
    return {
        "w1": rng.normal(0, np.sqrt(2 / n_in), (n_in, hidden)),
        "b1": np.zeros(hidden),
        "w2": rng.normal(0, np.sqrt(2 / hidden), (hidden, n_out)),
        "b2": np.zeros(n_out),
    }


def forward(params: Params, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Hidden activations and class probabilities."""
    h = np.maximum(0, x @ params["w1"] + params["b1"])
    logits = h @ params["w2"] + params["b2"]
    logits -= logits.max(axis=1, keepdims=True)  # keeps exp() finite
    p = np.exp(logits)
    return h, p / p.sum(axis=1, keepdims=True)


def gradients(params: Params, x: np.ndarray, y: np.ndarray) -> Params:
    """Gradients of the mean cross-entropy, by hand."""
    h, p = forward(params, x)
    d_logits = p
    d_logits[np.arange(len(y)), y] -= 1
    d_logits /= len(y)
    d_h = (d_logits @ params["w2"].T) * (h > 0)
    return {
        "w1": x.T @ d_h,
        "b1": d_h.sum(axis=0),
        "w2": h.T @ d_logits,
        "b2": d_logits.sum(axis=0),
    }


class Adam:
    def __init__(self, params: Params, lr: float) -> None:
        self.lr, self.t = lr, 0
        self.m = {k: np.zeros_like(v) for k, v in params.items()}
        self.v = {k: np.zeros_like(v) for k, v in params.items()}

    def step(self, params: Params, grads: Params, b1: float = 0.9, b2: float = 0.999) -> None:
        self.t += 1
        for k, g in grads.items():
            self.m[k] = b1 * self.m[k] + (1 - b1) * g
            self.v[k] = b2 * self.v[k] + (1 - b2) * g * g
            m_hat = self.m[k] / (1 - b1**self.t)
            v_hat = self.v[k] / (1 - b2**self.t)
            params[k] -= self.lr * m_hat / (np.sqrt(v_hat) + 1e-8)


def evaluate(params: Params, x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Mean cross-entropy and accuracy."""
    _, p = forward(params, x)
    loss = -np.log(p[np.arange(len(y)), y] + 1e-12).mean()
    return float(loss), float((p.argmax(axis=1) == y).mean())


def log_metrics(values: dict[str, float], step: int) -> None:
    """Report training metrics to corral (also works where corral is not installed)."""
    try:
        from corral import job
    except ImportError:
        print("corral:metrics " + json.dumps({"step": step, **values}), flush=True)
        return
    job.log_metrics(values, step=step)


CHECKPOINT = "checkpoint.npz"


def save_checkpoint(out: pathlib.Path, params: Params, opt: Adam, epoch: int) -> None:
    out.mkdir(parents=True, exist_ok=True)
    state = {f"p_{k}": v for k, v in params.items()}
    state |= {f"m_{k}": v for k, v in opt.m.items()} | {f"v_{k}": v for k, v in opt.v.items()}
    tmp = out / f".{CHECKPOINT}"
    with tmp.open("wb") as fh:
        np.savez(fh, epoch=epoch, t=opt.t, **state)
    tmp.replace(out / CHECKPOINT)


def load_checkpoint(out: pathlib.Path, params: Params, opt: Adam) -> int:
    """The epoch the checkpoint in `out` ended (0 without one); restores params and opt."""
    path = out / CHECKPOINT
    if not path.is_file():
        return 0
    with np.load(path) as ck:
        for k in params:
            params[k] = ck[f"p_{k}"]
            opt.m[k], opt.v[k] = ck[f"m_{k}"], ck[f"v_{k}"]
        opt.t = int(ck["t"])
        return int(ck["epoch"])


def checkpoints(args: argparse.Namespace) -> tuple[pathlib.Path, bool]:
    """Where checkpoints go, and whether to start from the latest one there."""
    # corral sets CORRAL_CHECKPOINT_DIR for a job that names a checkpoint channel, and
    # counts its attempts in CORRAL_ATTEMPT: one after the first is a restart after a fault.
    where = os.environ.get("CORRAL_CHECKPOINT_DIR") or args.train_url
    restarted = int(os.environ.get("CORRAL_ATTEMPT") or "1") > 1
    # ... and sets CORRAL_RESUME_FROM in a version created with `resume` from an earlier one.
    resume = (args.resume.lower() in ("1", "true", "yes") or restarted
              or bool(os.environ.get("CORRAL_RESUME_FROM")))
    return pathlib.Path(where), resume


def train(args: argparse.Namespace) -> tuple[Params, dict[str, float]]:
    rng = np.random.default_rng(args.seed)
    x, y = load_data(args, rng)
    order = rng.permutation(len(y))
    n_val = len(y) // 5
    val, fit = order[:n_val], order[n_val:]
    params = init_params(x.shape[1], args.hidden, int(y.max()) + 1, rng)
    opt = Adam(params, args.lr)
    ckpt, resume = checkpoints(args)
    first = load_checkpoint(ckpt, params, opt) + 1 if resume else 1
    if first > 1:
        print(f"resuming after epoch {first - 1} from {ckpt / CHECKPOINT}", flush=True)
        rng = np.random.default_rng([args.seed, first])
    every = args.log_every or max(1, args.epochs // 10)
    save_every = args.checkpoint_every or every
    print(f"training: {len(fit)} points, {n_val} held out, hidden={args.hidden}", flush=True)
    for epoch in range(first, args.epochs + 1):
        shuffled = rng.permutation(fit)
        for start in range(0, len(shuffled), args.batch_size):
            batch = shuffled[start : start + args.batch_size]
            opt.step(params, gradients(params, x[batch], y[batch]))
        if epoch % every == 0 or epoch == args.epochs:
            loss, acc = evaluate(params, x[fit], y[fit])
            print(f"epoch {epoch}/{args.epochs} loss={loss:.4f} accuracy={acc:.4f}", flush=True)
            log_metrics({"loss": loss, "accuracy": acc}, step=epoch)
        if epoch % save_every == 0 or epoch == args.epochs:
            save_checkpoint(ckpt, params, opt, epoch)
    loss, acc = evaluate(params, x[fit], y[fit])
    val_loss, val_acc = evaluate(params, x[val], y[val])
    return params, {
        "accuracy": acc,
        "loss": loss,
        "val_accuracy": val_acc,
        "val_loss": val_loss,
        "epochs": args.epochs,
        "points": len(y),
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    params, m = train(args)
    m["seconds"] = round(time.monotonic() - started, 3)
    out = pathlib.Path(args.train_url)
    out.mkdir(parents=True, exist_ok=True)
    np.savez(out / "model.npz", **params)
    (out / "metrics.json").write_text(json.dumps(m, indent=2) + "\n")
    print(f"saved: {out / 'model.npz'}", flush=True)
    log_metrics({k: float(m[k]) for k in ("val_accuracy", "val_loss")}, step=args.epochs)
    print(
        f"final: accuracy={m['accuracy']:.4f} loss={m['loss']:.4f} "
        f"val_accuracy={m['val_accuracy']:.4f} val_loss={m['val_loss']:.4f}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
