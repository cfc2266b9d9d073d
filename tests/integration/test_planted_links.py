"""A job that plants links where the server will later open files gets nothing through them.

A root server with `run_as` set and storage roots, and jobs of a real unprivileged user
(made here, removed after) that put symbolic links in the folders they own: in place of a
folder another job names as its code_dir, of their own log files, of their log export
folder. Each link points at what only root may read or write, inside the storage roots or
out of them; the server must neither read nor write through it.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import pwd
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

from tests import conftest, factories

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("useradd") is None,
    reason="needs root, to make an unprivileged user and run a server as root with run_as")

SECRET = "ROOT-ONLY-SECRET"


@pytest.fixture(scope="module")
def user() -> Iterator[pwd.struct_passwd]:
    name = f"corral-test-{secrets.token_hex(3)}"
    subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
                    name], check=True, capture_output=True)
    try:
        yield pwd.getpwnam(name)
    finally:
        subprocess.run(["userdel", name], check=False, capture_output=True)


@dataclasses.dataclass
class Place:
    base: pathlib.Path
    data: pathlib.Path  #: the storage root
    shared: pathlib.Path  #: in it, the folder the job's user owns
    private: pathlib.Path  #: in it too, a folder only root may enter
    secret_file: pathlib.Path  #: out of the roots, a file only root may read
    secret_dir: pathlib.Path  #: out of the roots, a folder only root may enter
    elsewhere: pathlib.Path  #: out of the roots, a folder root may write


@pytest.fixture
def place(user: pwd.struct_passwd) -> Iterator[Place]:
    """Folders the job's user can reach (pytest's own tmp dirs are root's only)."""
    base = pathlib.Path(tempfile.mkdtemp(prefix="corral-links-"))
    base.chmod(0o755)
    p = Place(base=base, data=base / "data", shared=base / "data" / "shared",
              private=base / "data" / "private", secret_file=base / "secret.txt",
              secret_dir=base / "secret", elsewhere=base / "elsewhere")
    for folder in (p.data, p.shared, p.private, p.secret_dir, p.elsewhere):
        folder.mkdir(mode=0o755)
    os.chown(p.shared, user.pw_uid, user.pw_gid)
    (p.private / "train.py").write_text(f"print('{SECRET}: the code of root')\n")
    (p.private / "key.txt").write_text(SECRET)
    p.private.chmod(0o700)
    p.secret_file.write_text(f"{SECRET}: a file of root\n")
    p.secret_file.chmod(0o600)
    (p.secret_dir / "worker-0.log").write_text(f"{SECRET}: a log of root\n")
    (p.secret_dir / "worker-0.log").chmod(0o600)
    p.secret_dir.chmod(0o700)
    yield p
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def live(place: Place, user: pwd.struct_passwd) -> Iterator[conftest.Live]:
    # One CPU: a second job waits for the first to end.
    server = conftest.start_live(place.base / "home", run_as=user.pw_name, cpus=1, storage={
        "roots": [str(place.data)], "open_default_project": False})
    yield server
    conftest.stop_live(server)


def script_job(place: Place, name: str, script: str, **overrides: Any) -> dict[str, Any]:
    """A job running `script` (sh) as the job's user; "$1" is its first argument."""
    path = place.base / f"{name}.sh"
    path.write_text(script)
    path.chmod(0o644)
    return factories.make_job(command=f"sh {path}", **overrides)


def events(live: conftest.Live, job_id: str) -> list[str]:
    r = live.http.get(live.path(f"/training-jobs/{job_id}/events"), params={"limit": 100})
    assert r.status_code == 200, r.text
    return [e["message"] for e in r.json()["events"]]


def logs(live: conftest.Live, job_id: str) -> list[str]:
    """The task's log as the preview and the log call give it."""
    said = []
    for rest in ("/logs/preview", "/logs"):
        r = live.http.get(live.path(f"/training-jobs/{job_id}/tasks/worker-0{rest}"))
        assert r.status_code == 200, r.text
        said.append(r.json()["content"])
    return said


def test_a_code_dir_made_a_link_while_its_job_waits_is_not_copied_with_roots_rights(
        live: conftest.Live, place: Place) -> None:
    """Job A makes a folder in its output, job B names it as its code_dir and waits for
    A's CPU; A then puts a link to a root-only folder of the storage roots in its place."""
    out = place.shared / "a"
    a = live.submit(script_job(place, "a", f"""o="${{1#--o=}}"
mkdir "$o/code" && echo "print('innocent')" > "$o/code/train.py"
while [ ! -e "$o/go" ]; do sleep 0.1; done
mv "$o/code" "$o/was-code" && ln -s {place.private} "$o/code"
""", outputs={"o": str(out)}))["metadata"]["id"]
    factories.wait_for(lambda: (out / "code" / "train.py").exists(), what="A's code folder")
    b = live.submit(factories.make_job(code_dir=out / "code"))["metadata"]["id"]
    assert live.job(b)["status"]["phase"] not in {"Running", *conftest.TERMINAL}
    (out / "go").touch()
    assert live.wait(a)["status"]["phase"] == "Completed"
    done = live.wait(b)

    snapshot = live.settings.runs_dir / b / "attempt-1" / "code"
    assert not (snapshot / "key.txt").exists()
    assert not any(SECRET in said for said in logs(live, b))
    assert done["status"]["phase"] == "Failed"
    assert any("cannot snapshot code_dir" in e for e in events(live, b)), events(live, b)


@pytest.mark.parametrize("planted", ["the log file", "the logs folder"])
def test_a_log_made_a_link_to_a_root_only_file_is_not_read(
        live: conftest.Live, place: Place, planted: str) -> None:
    """The attempt folder is the job's user's: it can put its own `logs/` there."""
    swap = (f'mkdir "$a/logs" && ln -s {place.secret_file} "$a/logs/worker-0.log"'
            if planted == "the log file" else f'ln -s {place.secret_dir} "$a/logs"')
    job = live.submit(script_job(place, "logs", f"""echo the words of the job
a=$(dirname "$(dirname "$CORRAL_METRICS_FILE")")
mv "$a/logs" "$a/was-logs" && {swap}
"""))["metadata"]["id"]
    assert live.wait(job)["status"]["phase"] == "Completed"
    attempt = live.settings.runs_dir / job / "attempt-1"
    assert (attempt / "logs").is_symlink() or (attempt / "logs" / "worker-0.log").is_symlink()

    assert not any(SECRET in said for said in logs(live, job))


@pytest.mark.parametrize("target", ["out of the roots", "a root-only folder in them"])
def test_a_log_export_folder_made_a_link_gets_nothing_written_through_it(
        live: conftest.Live, place: Place, target: str) -> None:
    where = place.elsewhere if target == "out of the roots" else place.private
    export = place.shared / "exported"
    body = script_job(place, "export", f"echo a line to export\nln -s {where} {export}\n")
    body["spec"]["log_export_path"] = {"host_path": str(export)}
    job = live.submit(body)["metadata"]["id"]
    assert live.wait(job)["status"]["phase"] == "Completed"

    def failed() -> list[str]:
        return [e for e in events(live, job) if e.startswith("Log export failed")]

    said = factories.wait_for(lambda: failed() or (where / "attempt-1").exists(),
                              what="the export, or its failure")
    assert not (where / "attempt-1").exists()
    assert said == failed()
