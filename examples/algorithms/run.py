"""Run the algorithms example in one command, on a corral server of its own:

    python examples/algorithms/run.py [--home DIR]

It saves algorithm.yaml (the MLP of ../mlp with its parameters' defaults and
constraints), shows it, trains a job made of it (job.yaml: hidden=32, the other
parameters the algorithm's), shows a job with a learning rate outside the algorithm's
range refused, deletes the algorithm and shows the job it made kept whole. About 20 s
on two cores. Exits with 0 when all of that went as said.
"""

from __future__ import annotations

import json
import pathlib
import re
import sys

import yaml

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # examples/runner.py
import runner

HERE = pathlib.Path(__file__).resolve().parent
NAME = "mlp-spirals"


def job_file(work: pathlib.Path, name: str, **parameters: str) -> pathlib.Path:
    """job.yaml under another name, its output in `work`, with `parameters` changed."""
    body = yaml.safe_load((HERE / "job.yaml").read_text())
    body["metadata"]["name"] = name
    body["algorithm"]["outputs"][0]["remote"]["obs"]["obs_url"] = str(work / name)
    given = {p["name"]: p["value"] for p in body["algorithm"]["parameters"]}
    body["algorithm"]["parameters"] = [{"name": k, "value": v}
                                       for k, v in {**given, **parameters}.items()]
    path = work / f"{name}.json"
    path.write_text(json.dumps(body))
    return path


def main() -> int:
    with runner.session(sys.argv[1:], __doc__.splitlines()[0]) as s:
        if s.corral("algorithms", "create", str(HERE / "algorithm.yaml")) != 0:
            return 1
        s.corral("algorithms", "show", NAME)
        said = s.output("submit", str(job_file(s.work, "mlp-from-algorithm")),
                        "--algorithm", NAME)
        job_id = re.search(r" as (\S+) \(", said)
        if job_id is None or s.corral("logs", "-f", job_id[1]) != 0:
            return 1
        bad = job_file(s.work, "mlp-too-fast", lr="0.5")
        if s.corral("submit", str(bad), "--algorithm", NAME) == 0:
            print("a learning rate outside the algorithm's range was accepted")
            return 1
        s.corral("algorithms", "delete", NAME)
        kept = s.api.get_job(job_id[1])
        alg = kept["algorithm"]
        args = " ".join(f"--{p['name']}={p['value']}" for p in alg["parameters"])
        print(f"\n# {kept['metadata']['name']} is {kept['status']['phase']}, made from "
              f"algorithm {alg['name']} ({alg['id']}) with {args}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
