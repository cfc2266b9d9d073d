"""Ray is an optional extra: without an address the executor is the local one (that the
server and the CLI never import Ray is in test_light_imports.py)."""

from __future__ import annotations

from corral import server
from tests.conftest import make_settings


def test_without_an_address_the_executor_is_local(tmp_path: object) -> None:
    ex = server.make_executor(make_settings(tmp_path))
    try:
        assert type(ex).__name__ == "LocalExecutor"
    finally:
        ex.close()

