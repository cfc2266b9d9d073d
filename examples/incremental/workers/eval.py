"""Evaluate: every model in MODEL_URLS (the new one, then the current one) on the same
frozen samples (TEST_DATASET_URL), each model's metrics under its index: 0/accuracy,
1/accuracy. The loop's deploy condition, `accuracy_delta`, is the first minus the second.
"""

from __future__ import annotations

import json
import os

import model


def main() -> None:
    rows = model.load_rows(os.environ["TEST_DATASET_URL"])
    metrics = {}
    for i, url in enumerate(os.environ["MODEL_URLS"].split(";")):
        metrics[f"{i}/accuracy"] = model.accuracy(model.read(url), rows)
        print(f"model {i} ({url}): accuracy {metrics[f'{i}/accuracy']:.3f} on {len(rows)} "
              "samples")
    print("corral:metrics " + json.dumps(metrics), flush=True)


if __name__ == "__main__":
    main()
