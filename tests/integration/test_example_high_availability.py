"""The high-availability example runs as a user runs it: two servers on PostgreSQL, the
leader killed, the job adopted by the other and completed once."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest
import sqlalchemy as sa

from tests import conftest

pytestmark = pytest.mark.slow

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "high-availability"


def test_the_leader_is_killed_and_the_other_server_finishes_the_job(
        pg_admin: sa.Engine) -> None:
    server = conftest.PG_ADMIN_URL.rsplit("/", 1)[0]
    proc = subprocess.run([sys.executable, str(EXAMPLE / "run.py"), "--database", server],
                          capture_output=True, text=True, timeout=150,
                          env={**os.environ, "COLUMNS": "200"})

    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout + proc.stderr  # (`logs -f` says how the job ended on stderr)
    assert "a leads; the job goes to b, the follower" in out or \
        "b leads; the job goes to a, the follower" in out
    assert out.count("started, pid") == 2  # in the logs shown before and after the kill
    assert "(epoch 2, since" in out and "ended Completed" in out
    assert "the job started once, was adopted by the new leader and completed" in out
