"""Ray is an optional extra: the server and the CLI never import it unless asked to."""

from __future__ import annotations

import subprocess
import sys

from corral import server
from tests.conftest import make_settings


def test_the_server_and_the_cli_do_not_import_ray() -> None:
    code = ("import sys, corral.server, corral.cli, corral.cli.demo, corral.executors.local.tasks, "
            "corral.executors.ray.bridge, corral.executors.routing; "
            "print(sorted(m for m in sys.modules if m == 'ray' or m.startswith('ray.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.strip() == "[]"


def test_without_an_address_the_executor_is_local(tmp_path: object) -> None:
    ex = server.make_executor(make_settings(tmp_path))
    try:
        assert type(ex).__name__ == "LocalExecutor"
    finally:
        ex.close()

