"""Train: a new model from the current one on this round's new samples.

As a loop's train job it reads Sedna's variables: BASE_MODEL_URL (the current model),
TRAIN_DATASET_URL (this round's samples) and MODEL_URL (where to write the new one). Run
by hand, or as the job that makes the first model, it takes corral's arguments instead:
--data_url (samples) and --train_url (where to write), and starts from nothing.
"""

from __future__ import annotations

import json
import os
import sys

import model


def arg(name: str) -> str | None:
    prefix = f"--{name}="
    return next((a[len(prefix):] for a in sys.argv[1:] if a.startswith(prefix)), None)


def main() -> None:
    data = os.environ.get("TRAIN_DATASET_URL") or arg("data_url")
    out = os.environ.get("MODEL_URL") or arg("train_url")
    base = os.environ.get("BASE_MODEL_URL")
    if not data or not out:
        sys.exit("train.py: no data (TRAIN_DATASET_URL, --data_url) or output "
                 "(MODEL_URL, --train_url)")
    rows = model.load_rows(data)
    w = model.read(base) if base and os.path.isdir(base) else [0.0, 0.0, 0.0]
    w = model.train(w, rows, epochs=int(arg("epochs") or 20))
    model.write(out, w)
    acc = model.accuracy(w, rows)
    print(f"trained on {len(rows)} samples: training accuracy {acc:.3f}")
    print("corral:metrics " + json.dumps({"train_accuracy": acc}), flush=True)


if __name__ == "__main__":
    main()
