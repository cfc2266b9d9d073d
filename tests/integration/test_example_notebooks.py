"""The notebook example runs as a user runs it, from a checkout, in one command: a real
JupyterLab reached through corral's proxy with the cookie its one-time URL gives, a file
written there that outlives a stop and a start."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

RUN = pathlib.Path(__file__).resolve().parents[2] / "examples" / "notebooks" / "run.py"


def test_the_example_writes_a_file_through_the_proxy_that_outlives_a_restart(
        tmp_path: pathlib.Path) -> None:
    env = {**os.environ, "COLUMNS": "200"}
    proc = subprocess.run([sys.executable, str(RUN), "--home", str(tmp_path / "home")],
                          capture_output=True, text=True, timeout=110, env=env)
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-3000:]
    assert "a browser that has not opened its URL is refused: 401" in out
    assert out.count("corral's cookie corral-notebook set") == 2  # one login per session
    assert "/api/contents/hello.py -> 201" in out
    assert "the first browser's cookie was for the first session only: 401" in out
    assert "hello.py survived the restart" in out

    # The workspace stays on the server's disk after the notebook is deleted.
    kept = list((tmp_path / "home" / "projects").glob("*/notebooks/*/hello.py"))
    assert len(kept) == 1 and "kept across sessions" in kept[0].read_text()
    assert "explore" not in out.rsplit("$ corral notebook list", 1)[1]  # deleted
