"""Which command lines run as one program directly, and which need /bin/sh."""

from __future__ import annotations

import os

import pytest

from corral.scheduler import launching

PATH = os.defpath + ":/usr/bin:/bin"


@pytest.mark.parametrize(("command", "words"), [
    ('python3 -c "print(1)"', ["python3", "-c", "print(1)"]),
    ("sleep 30", ["sleep", "30"]),
    ("python3 -c 'import sys; print(sys.argv)'", ["python3", "-c", "import sys; print(sys.argv)"]),
])
def test_a_plain_program_runs_without_a_shell(command: str, words: list[str]) -> None:
    assert launching.simple_command(command, PATH) == words


@pytest.mark.parametrize("command", [
    "sleep 3; echo slept",          # a list
    "python3 x.py > out",           # a redirection
    "python3 a.py && python3 b.py",  # an operator
    "cat a | wc -l",                 # a pipe
    "ls *.py",                       # a glob
    "echo $HOME",                    # an expansion
    "FOO=1 python3 a.py",            # an assignment
    "exit 3",                        # a built-in
    "cd /tmp",                       # a built-in
    "no-such-program-here a",        # not on PATH: let the shell say so
    "python3 -c 'unbalanced",        # a quoting error: let the shell say so
])
def test_anything_a_shell_would_interpret_keeps_the_shell(command: str) -> None:
    assert launching.simple_command(command, PATH) is None


def test_the_servers_secrets_never_reach_a_job() -> None:
    server_env = {
        "PATH": "/usr/bin", "HOME": "/home/corral", "LANG": "C.UTF-8",
        "CORRAL_SERVER_KEY": "k", "CORRAL_DATABASE_URL": "postgresql://u:pw@db/x",
        "AWS_SECRET_ACCESS_KEY": "s", "aws_session_token": "t", "HUAWEICLOUD_SDK_SK": "s",
        "OBS_SECRET": "s", "PGPASSWORD": "pw", "GOOGLE_APPLICATION_CREDENTIALS": "/k.json",
    }

    assert launching.base_env(server_env) == {
        "PATH": "/usr/bin", "HOME": "/home/corral", "LANG": "C.UTF-8"}
    assert launching.base_env(server_env, deny=["LANG"]) == {
        "PATH": "/usr/bin", "HOME": "/home/corral", "AWS_SECRET_ACCESS_KEY": "s",
        "aws_session_token": "t", "HUAWEICLOUD_SDK_SK": "s", "OBS_SECRET": "s",
        "PGPASSWORD": "pw", "GOOGLE_APPLICATION_CREDENTIALS": "/k.json"}
