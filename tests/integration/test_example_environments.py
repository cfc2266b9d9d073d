"""The environments example run as a user runs it, from a checkout, in one command: a job
reads its settings with a package it asked for, a second runs in the same environment
without a build, and a package that does not exist fails its job with the installer's
words."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

RUN = pathlib.Path(__file__).resolve().parents[2] / "examples" / "environments" / "run.py"


def test_the_environments_example_builds_once_and_fails_a_missing_package(
        tmp_path: pathlib.Path) -> None:
    env = {**os.environ, "COLUMNS": "200"}
    proc = subprocess.run([sys.executable, str(RUN), "--home", str(tmp_path / "home")],
                          capture_output=True, text=True, timeout=240, env=env)

    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    envs = tmp_path / "home" / "envs"
    assert f"python {envs}/" in out and "greeting_length=38" in out
    assert out.count("Building environment") == 1  # (the events of the first job shown)
    assert "toml-typo is Failed/CreateFailed: installing failed" in out
    assert "tomlii-no-such-package was not found" in out
