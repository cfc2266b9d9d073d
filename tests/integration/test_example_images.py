"""The images example run as a user runs it, from a checkout, in one command: a job runs in
an image made on this machine, writes into its output folder, and a job whose image does
not exist fails with podman's words. Without podman (or a static busybox) skipped, or
failed under CI=true (.ci/run installs them)."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

RUN = pathlib.Path(__file__).resolve().parents[2] / "examples" / "images" / "run.py"


def test_the_images_example_runs_a_job_in_an_image(tmp_path: pathlib.Path) -> None:
    if shutil.which("podman") is None or not os.path.exists("/bin/busybox") \
            or os.geteuid() != 0:
        why = "the images example needs root, podman and /bin/busybox"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{why}, and CI=true")
        pytest.skip(why)
    env = {**os.environ, "COLUMNS": "200"}
    proc = subprocess.run([sys.executable, str(RUN), "--home", str(tmp_path / "home")],
                          capture_output=True, text=True, timeout=240, env=env)

    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "in the image: localhost/corral-example-busybox:1, as user 0" in out
    assert "greeting: hello from a container" in out
    assert (tmp_path / "home-work" / "out" / "greeting.txt").read_text() == \
        "hello from a container\n"
    assert "no-such-image is Failed" in out and "corral-example-none" in out
