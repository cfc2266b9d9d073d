"""What a server and the CLI load only when they use it: Ray (an optional extra) only with
a Ray executor; Optuna, and NumPy with it, with the first hyperparameter search (17 MB of a
server's memory otherwise)."""

from __future__ import annotations

import json
import subprocess
import sys


def loaded(modules: str, roots: tuple[str, ...]) -> list[str]:
    """The modules under `roots` that importing `modules` (comma-separated) loads, in a
    fresh interpreter."""
    code = (f"import json, sys, {modules}; "
            f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {roots!r})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    return list(json.loads(out.stdout))


def test_the_server_and_the_cli_do_not_import_ray() -> None:
    assert loaded("corral.server, corral.cli, corral.cli.demo, "
                  "corral.executors.local.tasks, corral.executors.ray.bridge, "
                  "corral.executors.routing", ("ray",)) == []


def test_a_server_loads_no_optuna_until_a_search_needs_it() -> None:
    assert loaded("corral.server, corral.cli, corral.api.app, "
                  "corral.kinds.search.controller, corral.kinds.search.actions",
                  ("optuna", "numpy")) == []
