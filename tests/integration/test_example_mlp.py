"""The example training script run as corral runs it: a subprocess with ModelArts-style args."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import numpy as np

TRAIN = pathlib.Path(__file__).parents[2] / "examples" / "mlp" / "train.py"


def run_train(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(TRAIN), *args], capture_output=True, text=True, timeout=60
    )


def final_line(stdout: str) -> dict[str, float]:
    line = next(x for x in stdout.splitlines() if x.startswith("final:"))
    return {k: float(v) for k, v in (item.split("=") for item in line.split()[1:])}


def test_trains_and_saves_the_model(tmp_path: pathlib.Path) -> None:
    proc = run_train("--epochs=40", f"--train_url={tmp_path}")

    assert proc.returncode == 0, proc.stderr
    final = final_line(proc.stdout)
    assert final["accuracy"] >= 0.9
    assert final["val_accuracy"] >= 0.85
    assert "epoch 40/40 loss=" in proc.stdout
    with np.load(tmp_path / "model.npz") as model:
        assert set(model.files) == {"w1", "b1", "w2", "b2"}
        assert model["w1"].shape == (2, 64)
    saved = json.loads((tmp_path / "metrics.json").read_text())
    assert abs(saved["accuracy"] - final["accuracy"]) < 1e-3


def test_ignores_arguments_it_does_not_know(tmp_path: pathlib.Path) -> None:
    proc = run_train(
        "--epochs=2", f"--train_url={tmp_path}", "--init_method=tcp://x:1", "--rank=0", "--foo"
    )

    assert proc.returncode == 0, proc.stderr
    assert "ignoring arguments: --init_method=tcp://x:1 --rank=0 --foo" in proc.stdout
    assert (tmp_path / "model.npz").is_file()


def test_reads_data_from_the_input_channel(tmp_path: pathlib.Path) -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(0, 1, (300, 3))
    y = (x[:, 0] > 0).astype(np.int64)  # linearly separable: any working MLP learns it
    data_dir, out = tmp_path / "data", tmp_path / "out"
    data_dir.mkdir()
    np.savez(data_dir / "data.npz", x=x, y=y)

    proc = run_train("--epochs=30", f"--data_url={data_dir}", f"--train_url={out}")

    assert proc.returncode == 0, proc.stderr
    assert json.loads((out / "metrics.json").read_text())["points"] == 300
    assert final_line(proc.stdout)["accuracy"] >= 0.95
    with np.load(out / "model.npz") as model:
        assert model["w1"].shape[0] == 3


def test_generates_data_when_the_input_channel_has_none(tmp_path: pathlib.Path) -> None:
    proc = run_train("--epochs=1", f"--data_url={tmp_path}", f"--train_url={tmp_path / 'o'}")

    assert proc.returncode == 0, proc.stderr
    assert "generating spirals" in proc.stdout


def run_as_attempt(attempt: int, ckpt: pathlib.Path,
                   *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CORRAL_ATTEMPT": str(attempt), "CORRAL_CHECKPOINT_DIR": str(ckpt)}
    env.pop("CORRAL_RESUME_FROM", None)
    return subprocess.run([sys.executable, str(TRAIN), *args], capture_output=True, text=True,
                          timeout=60, env=env)


def test_a_restarted_attempt_resumes_from_the_latest_checkpoint(tmp_path: pathlib.Path) -> None:
    ckpt, out = tmp_path / "ckpt", tmp_path / "out"
    first = run_as_attempt(1, ckpt, "--epochs=12", "--checkpoint_every=4",
                           f"--train_url={out}")
    assert first.returncode == 0, first.stderr
    assert "resuming" not in first.stdout
    with np.load(ckpt / "checkpoint.npz") as saved:
        assert int(saved["epoch"]) == 12  # written to the checkpoint folder, every 4 epochs

    again = run_as_attempt(2, ckpt, "--epochs=20", "--checkpoint_every=4", f"--train_url={out}")

    assert again.returncode == 0, again.stderr
    assert f"resuming after epoch 12 from {ckpt / 'checkpoint.npz'}" in again.stdout
    assert "epoch 2/20" not in again.stdout and "epoch 20/20" in again.stdout
    anew = run_as_attempt(1, ckpt, "--epochs=2", f"--train_url={out}")  # a first attempt
    assert "resuming" not in anew.stdout
