"""Run the repair example in one command, on a corral server of its own:

    python examples/pipelines/repair/run.py [--home DIR]

The pipeline fails at `validate` (3 bad rows, none allowed); a rerun that allows 5 runs
again only what did not succeed (`fetch` keeps its output) and succeeds. Exits with 0 when
it went so.
"""

from __future__ import annotations

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))  # examples/runner.py
import runner

HERE = pathlib.Path(__file__).resolve().parent


def main() -> int:
    with runner.session(sys.argv[1:], __doc__.splitlines()[0]) as s:
        if s.corral("pipeline", "submit", str(HERE / "pipeline.yaml"), "--watch") != 1:
            print("expected the first run to fail at validate", file=sys.stderr)
            return 1
        if s.corral("pipeline", "rerun", "repair", "-p", "max_bad_rows=5", "--watch") != 0:
            return 1
        s.corral("pipeline", "show", "repair")
        s.corral("models", "show", "repair-demo")
    return 0


if __name__ == "__main__":
    sys.exit(main())
