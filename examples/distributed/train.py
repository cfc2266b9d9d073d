"""Data-parallel training with PyTorch DDP: one process per corral task, gloo on CPUs.

Each of the job's `node_count` tasks runs this file. `torch.distributed` finds its peers
from what corral gives every task (docs/jobs.md, "Distributed training"): `RANK`,
`WORLD_SIZE`, `MASTER_ADDR` and `MASTER_PORT`. A tiny MLP (1 -> 16 -> 1) learns
y = sin(3x); each rank draws its own batch per step and DDP averages their gradients, so
the ranks' weights stay equal.

Rank 0 writes `checkpoint.pt` (step, model, optimizer) every `--checkpoint_every` steps
into the job's checkpoint folder (`CORRAL_CHECKPOINT_DIR`, else `--train_url`). An
attempt after the first (`CORRAL_ATTEMPT` above 1: a restart after a worker was killed)
reads it on rank 0 and hands it to every rank, so all carry on from the step after it:

    attempt 2: resuming after step 10 from .../checkpoint.pt

Ends with `model.pt` in --train_url and, on every rank, `final: ... params=<sum>` (the
same sum on every rank). Alone, outside corral, it runs as one rank:
`python train.py --train_url=/tmp/ddp`. Needs PyTorch.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

CHECKPOINT = "checkpoint.pt"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--checkpoint_every", type=int, default=5)
    p.add_argument("--seconds_per_step", type=float, default=0.1)
    p.add_argument("--train_url", default="output")
    args, _unknown = p.parse_known_args(argv)  # ModelArts passes more than this needs
    return args


def batch(step: int, rank: int, size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Rank `rank`'s points at `step`: the same on every attempt, so a resumed run sees
    the data it would have seen."""
    g = torch.Generator().manual_seed(step * 1000 + rank)
    x = torch.rand(size, 1, generator=g) * 4 - 2
    return x, torch.sin(3 * x)


def load(where: pathlib.Path) -> dict | None:
    try:
        return torch.load(where / CHECKPOINT, weights_only=True)
    except FileNotFoundError:
        return None


def save(where: pathlib.Path, state: dict) -> None:
    where.mkdir(parents=True, exist_ok=True)
    part = where / (CHECKPOINT + ".part")
    torch.save(state, part)
    part.replace(where / CHECKPOINT)  # a kill never leaves half a checkpoint


def resume(rank: int, ckpt: pathlib.Path) -> dict | None:
    """The checkpoint to carry on from, the same on every rank: rank 0's, broadcast (the
    other ranks need not see the folder)."""
    attempt = int(os.environ.get("CORRAL_ATTEMPT") or "1")
    found = [load(ckpt) if rank == 0 and attempt > 1 else None]
    dist.broadcast_object_list(found, src=0)
    if rank == 0:
        if found[0] is not None:
            print(f"attempt {attempt}: resuming after step {found[0]['step']} from "
                  f"{ckpt / CHECKPOINT}", flush=True)
        else:
            print(f"attempt {attempt}: starting at step 1", flush=True)
    return found[0]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    for key, default in (("RANK", "0"), ("WORLD_SIZE", "1"), ("MASTER_ADDR", "127.0.0.1"),
                         ("MASTER_PORT", "29500")):
        os.environ.setdefault(key, default)  # alone: a world of one
    dist.init_process_group("gloo")  # env://: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
    rank, world = dist.get_rank(), dist.get_world_size()
    print(f"rank {rank} of {world}: node {os.environ.get('NODE_RANK', rank)}, "
          f"master {os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}", flush=True)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, 1))
    optim = torch.optim.Adam(model.parameters(), lr=args.lr)
    ckpt = pathlib.Path(os.environ.get("CORRAL_CHECKPOINT_DIR") or args.train_url)
    state = resume(rank, ckpt)
    done = 0
    if state is not None:
        model.load_state_dict(state["model"])
        optim.load_state_dict(state["optim"])
        done = int(state["step"])
    ddp = DistributedDataParallel(model)  # broadcasts rank 0's weights to every rank
    loss_fn = nn.MSELoss()
    loss = torch.tensor(float("nan"))  # (none left to run: the checkpoint was the last)
    for step in range(done + 1, args.steps + 1):
        x, y = batch(step, rank, args.batch)
        optim.zero_grad()
        loss = loss_fn(ddp(x), y)
        loss.backward()  # DDP averages the gradients of all ranks here
        optim.step()
        time.sleep(args.seconds_per_step)
        if rank == 0:
            saved = step % args.checkpoint_every == 0
            if saved:
                save(ckpt, {"step": step, "model": model.state_dict(),
                            "optim": optim.state_dict()})
            print(f"step {step}/{args.steps} loss={loss.item():.4f}"
                  + (" (checkpoint saved)" if saved else ""), flush=True)
            print(f"corral:metrics step={step} loss={loss.item():.6f}", flush=True)
    total = sum(float(p.detach().sum()) for p in model.parameters())
    print(f"final: rank {rank} loss={loss.item():.4f} params={total:.6f}", flush=True)
    if rank == 0:
        out = pathlib.Path(args.train_url)
        out.mkdir(parents=True, exist_ok=True)
        torch.save(model.state_dict(), out / "model.pt")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
