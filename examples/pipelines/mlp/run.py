"""Run the MLP pipeline example in one command, on a corral server of its own:

    python examples/pipelines/mlp/run.py [--home DIR]

It submits pipeline.yaml and follows it (prepare, the two variants of train at once,
evaluate), shows the model it registered, and removes the intermediate outputs. About half
a minute on two cores. Exits with 0 when the pipeline succeeded.
"""

from __future__ import annotations

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))  # examples/runner.py
import runner

HERE = pathlib.Path(__file__).resolve().parent


def main() -> int:
    with runner.session(sys.argv[1:], __doc__.splitlines()[0]) as s:
        if s.corral("pipeline", "submit", str(HERE / "pipeline.yaml"), "--watch") != 0:
            return 1
        s.corral("models", "show", "spirals-best")
        s.corral("pipeline", "clean", "spirals")
    return 0


if __name__ == "__main__":
    sys.exit(main())
