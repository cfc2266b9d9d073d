"""Run the datasets example in one command, on a corral server of its own:

    python examples/datasets/run.py [--home DIR]

It makes dataset `points` of a csv file of 40 samples and freezes them as version V0001,
appends 40 more and freezes V0002, then trains job.yaml on V0001 and the same job on V0002:
the first reads 40 samples, the second 80, and each model version names the dataset
version it was trained on (its lineage). A job naming a version the dataset does not have
is refused. About 10 s on two cores. Exits with 0 when all of that went as said.
"""

from __future__ import annotations

import json
import pathlib
import random
import sys
from typing import Any

import yaml

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # examples/runner.py
import runner

HERE = pathlib.Path(__file__).resolve().parent


def rows(rng: random.Random, n: int) -> list[str]:
    """`n` points around (0, 0), label a, and around (3, 3), label b."""
    out = []
    for i in range(n):
        label, centre = ("a", 0.0) if i % 2 else ("b", 3.0)
        out.append(f"{centre + rng.gauss(0, 1):.3f},{centre + rng.gauss(0, 1):.3f},{label}")
    return out


def job_file(work: pathlib.Path, name: str, version: str) -> pathlib.Path:
    """job.yaml under another name, reading `version` of dataset points."""
    body = yaml.safe_load((HERE / "job.yaml").read_text())
    body["metadata"]["name"] = name
    body["algorithm"]["code_dir"] = str(HERE)
    body["algorithm"]["inputs"][0]["remote"]["dataset"]["version_id"] = version
    body["algorithm"]["outputs"][0]["remote"]["obs"]["obs_url"] = str(work / name)
    path = work / f"{name}.json"
    path.write_text(json.dumps(body))
    return path


def trained(s: runner.Session, name: str, version: str) -> dict[str, Any]:
    """Train on `version` of points; the model version the job was registered as."""
    s.output("submit", str(job_file(s.work, name, version)))
    if s.corral("logs", "-f", name) != 0:
        raise SystemExit(f"job {name} did not complete")
    return runner.wait(f"model {name} to be registered", lambda: _latest(s, name))


def _latest(s: runner.Session, name: str) -> dict[str, Any] | None:
    try:
        return s.api.model_version(name, "latest")
    except Exception:  # not registered yet
        return None


def main() -> int:
    rng = random.Random(7)
    with runner.session(sys.argv[1:], __doc__.splitlines()[0]) as s:
        index = s.work / "points.csv"
        index.write_text("x,y,label\n" + "".join(f"{r}\n" for r in rows(rng, 40)))
        more = s.work / "more.csv"
        more.write_text("".join(f"{r}\n" for r in rows(rng, 40)))
        s.output("datasets", "create", "points", str(index))
        s.output("datasets", "version", "create", "points", "--description", "the first 40")
        s.output("datasets", "append", "points", "-f", str(more))
        s.output("datasets", "version", "create", "points", "--description", "80 samples")
        s.output("datasets", "version", "list", "points")
        first = trained(s, "points-v1", "V0001")
        second = trained(s, "points-v2", "V0002")
        s.output("models", "show", "points-v1", "1")
        lineage = [(m["datasets"][0]["version_name"], m["metrics"].get("samples"))
                   for m in (first, second)]
        print(f"\n# lineage: points-v1 <- {lineage[0]}, points-v2 <- {lineage[1]}")
        refused = s.corral("submit", str(job_file(s.work, "points-v9", "V0009")))
        return 0 if lineage == [("V0001", 40.0), ("V0002", 80.0)] and refused != 0 else 1


if __name__ == "__main__":
    sys.exit(main())
