"""Fits a nearest-centroid classifier to the samples of a dataset version (standard library
only). The version comes as --data_url=<folder>: samples.csv (x,y,label rows after a
header) and manifest.json (which dataset and version, its content hash). Writes model.json
into --train_url and reports its accuracy on the samples as a metric."""

from __future__ import annotations

import csv
import json
import pathlib
import sys

args = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
data, out = pathlib.Path(args["data_url"]), pathlib.Path(args["train_url"])
manifest = json.loads((data / "manifest.json").read_text())
with (data / "samples.csv").open(newline="") as fh:
    rows = [(float(r["x"]), float(r["y"]), r["label"]) for r in csv.DictReader(fh)]
print(f"read {len(rows)} samples of dataset {manifest['dataset']['name']} version "
      f"{manifest['version']['name']} ({manifest['content_hash'][:19]}...)")

centroids = {}
for label in sorted({r[2] for r in rows}):
    mine = [r for r in rows if r[2] == label]
    centroids[label] = (sum(r[0] for r in mine) / len(mine), sum(r[1] for r in mine) / len(mine))


def predict(x: float, y: float) -> str:
    return min(centroids, key=lambda k: (centroids[k][0] - x) ** 2 + (centroids[k][1] - y) ** 2)


accuracy = sum(predict(x, y) == label for x, y, label in rows) / len(rows)
out.mkdir(parents=True, exist_ok=True)
(out / "model.json").write_text(json.dumps({"centroids": centroids,
                                            "trained_on": manifest["version"]}, indent=2))
print(f"corral:metrics step=1 accuracy={accuracy:.3f} samples={len(rows)}")
