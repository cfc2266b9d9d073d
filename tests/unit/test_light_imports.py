"""What a server loads only when it is used: Optuna (and NumPy with it) with the first
hyperparameter search, not at start (17 MB of a server's memory otherwise)."""

from __future__ import annotations

import subprocess
import sys


def test_a_server_loads_no_optuna_until_a_search_needs_it() -> None:
    code = ("import sys, corral.server, corral.cli, corral.api.app, "
            "corral.kinds.search.controller, corral.kinds.search.actions; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('optuna', 'numpy')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.strip() == "[]"
