"""A root server with `run_as` starts its tasks as that user, who cannot read its secrets."""

from __future__ import annotations

import os
import pathlib
import pwd
import tempfile
from collections.abc import Iterator

import pytest

from tests import conftest, factories

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="starting tasks as another user "
                                "needs a server running as root")
USER = "nobody"


@pytest.fixture
def open_dir() -> Iterator[pathlib.Path]:
    """A directory the task's user can reach (pytest's own tmp dirs are root's only)."""
    path = pathlib.Path(tempfile.mkdtemp(prefix="corral-run-as-"))
    path.chmod(0o755)
    yield path
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def test_tasks_run_as_the_configured_user_and_cannot_read_the_server_key(
        open_dir: pathlib.Path) -> None:
    nobody = pwd.getpwnam(USER)
    live = conftest.start_live(open_dir / "home", run_as=USER)
    try:
        key = live.settings.key_file
        out = open_dir / "out"
        script = (f"id -u; cat {key} >/dev/null 2>&1 && echo READ-THE-KEY || echo key-denied; "
                  f"cat {live.settings.credentials_file} >/dev/null 2>&1 && echo READ-LOGIN "
                  f"|| echo login-denied; echo made > \"${{1#--o=}}\"/result.txt; "
                  "touch \"$CORRAL_METRICS_FILE\" && echo metrics-kept")
        # The output channel comes as the argument --o=<dir>.
        body = factories.make_job(command=f"sh -c '{script}' task", outputs={"o": str(out)})
        job = live.submit(body)["metadata"]["id"]
        done = live.wait(job)
        log = live.http.get(live.path(f"/training-jobs/{job}/tasks/worker-0/logs")).json()
    finally:
        conftest.stop_live(live)

    assert done["status"]["phase"] == "Completed", log["content"]
    lines = log["content"].split()
    assert lines[0] == str(nobody.pw_uid)
    assert "key-denied" in lines and "login-denied" in lines
    assert "metrics-kept" in lines  # its metrics directory is the task user's too
    assert (out / "result.txt").read_text() == "made\n"
    assert (out / "result.txt").stat().st_uid == nobody.pw_uid


def test_an_unknown_run_as_user_stops_the_start(tmp_path: pathlib.Path) -> None:
    from corral import server
    from corral.domain import errors

    with pytest.raises(errors.CorralError, match="no user 'no-such-user-here'"):
        server.start_embedded(conftest.make_settings(tmp_path / "home",
                                                     run_as="no-such-user-here"))


def test_a_task_can_neither_leave_its_cgroup_nor_write_its_log(open_dir: pathlib.Path) -> None:
    """Its output goes through a pipe into a log that is root's; its cgroup takes no
    order from it."""
    from corral.executors import base
    from corral.executors.local import cgroups, claims

    state = open_dir / "state"
    state.mkdir()
    state.chmod(0o777)
    live = conftest.start_live(open_dir / "home", run_as=USER)
    try:
        executor = live.embedded.platform.executor
        assert isinstance(executor, base.Contains)
        if not executor.containment().startswith("cgroup"):
            pytest.skip(f"tasks get no cgroups here: {executor.containment()}")
        script = (
            "import os, pathlib, time\n"
            f"state = pathlib.Path({str(state)!r})\n"
            "while not (state / 'target').exists(): time.sleep(0.05)\n"
            "try:\n"
            "    open((state / 'target').read_text(), 'w').write(str(os.getpid()))\n"
            "    print('left-the-cgroup')\n"
            "except OSError:\n"
            "    print('cgroup-kept')\n"
            "log = pathlib.Path(os.environ['CORRAL_METRICS_FILE']).parents[1] / 'logs'\n"
            "try:\n"
            "    open(log / 'worker-0.log', 'a').write('WROTE-THE-LOG\\n')\n"
            "except OSError:\n"
            "    print('log-denied')\n")
        (open_dir / "escape.py").write_text(script)
        # (the system's Python: the server's may lie where the task's user cannot go)
        body = factories.make_job(command=f"python3 {open_dir / 'escape.py'}")
        job = live.submit(body)["metadata"]["id"]
        ctl = live.settings.runs_dir / job / "attempt-1" / "ctl"

        def group() -> cgroups.Group | None:
            for path in ctl.glob("*.claim") if ctl.exists() else ():
                name = path.name.split(".")[1]
                return claims.read(str(path)).group(name)
            return None

        found: cgroups.Group = factories.wait_for(group, 20, "the task's cgroup")
        server_cgroup = os.path.dirname(os.path.dirname(found.dirs[0]))
        (state / "target").write_text(f"{server_cgroup}/cgroup.procs")
        done = live.wait(job)
        log = live.http.get(live.path(f"/training-jobs/{job}/tasks/worker-0/logs")).json()
    finally:
        conftest.stop_live(live)

    assert done["status"]["phase"] == "Completed", (done["status"]["reason"], log["content"])
    assert "cgroup-kept" in log["content"] and "log-denied" in log["content"]
    assert "WROTE-THE-LOG" not in log["content"]
