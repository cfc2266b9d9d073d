"""Run the hyperparameter search example in one command, on a corral server of its own:

    python examples/search/run.py [--home DIR]

It submits job.yaml (the MLP searched over lr and hidden units, 8 trials, 2 at once,
ASHA stopping losing trials early), follows it live, shows its trials and the model its
best trial registered. About a minute on two cores. Exits with 0 when the search completed.
"""

from __future__ import annotations

import json
import pathlib
import sys

import yaml

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # examples/runner.py
import runner

HERE = pathlib.Path(__file__).resolve().parent


def main() -> int:
    with runner.session(sys.argv[1:], __doc__.splitlines()[0]) as s:
        body = yaml.safe_load((HERE / "job.yaml").read_text())
        body["algorithm"]["code_dir"] = str(HERE.parent / "mlp")
        out = s.work / "search-output"
        body["algorithm"]["outputs"][0]["remote"]["obs"]["obs_url"] = str(out)
        job_file = s.work / "job.json"
        job_file.write_text(json.dumps(body))
        if s.corral("submit", str(job_file)) != 0:
            return 1
        if s.corral("search", "show", "mlp-search", "--watch") != 0:
            return 1
        s.corral("search", "trials", "mlp-search")
        s.corral("models", "show", "mlp-search")
    return 0


if __name__ == "__main__":
    sys.exit(main())
