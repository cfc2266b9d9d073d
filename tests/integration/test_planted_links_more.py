"""Links a job plants where the server (root, with run_as) later opens files on its own.

The attempt folder is the job's user's: a task, or any task of the same user, can put a
link where the attempt's `ctl/` or `logs/` was, or where a claim will be read. The local
executor's keeper, its launcher and the server must then write nothing through it (task
output, exit codes, `abandoned`) and read nothing through it. A real unprivileged user
(made here, removed after) plants the links in a run folder laid out as the scheduler lays
it out.
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
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from corral.domain import errors
from corral.executors import base
from corral.executors.local import claims
from tests import conftest, factories, s3
from tests.api import test_versions_api as helpers
from tests.integration import local_rig

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("useradd") is None,
    reason="needs root, to make an unprivileged user and run tasks as it")

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
class Run:
    """runs/<job>/attempt-1 as the scheduler makes it for a run_as user, and a folder only
    root may enter, out of the user's reach."""

    top: pathlib.Path
    attempt: pathlib.Path
    victim: pathlib.Path
    user: pwd.struct_passwd

    def as_user(self, script: str) -> None:
        """Run a shell script as the job's user, in the attempt folder."""
        subprocess.run(["sh", "-c", script], cwd=self.attempt, check=True,
                       user=self.user.pw_uid, group=self.user.pw_gid, extra_groups=[])

    def spec(self, script: str = "echo the words of the task") -> base.LaunchSpec:
        """A launch of a shell script as the job's user (the server's Python may be out of
        its reach)."""
        return base.LaunchSpec(
            job_id="job", task="worker-0", attempt=1, launch_id=uuid.uuid4().hex[:16],
            argv=("sh", "-c", script), cwd=str(self.attempt),
            env={"PATH": os.environ.get("PATH", os.defpath)},
            log_path=str(self.attempt / "logs" / "worker-0.log"),
            control_dir=str(self.attempt / "ctl"), node="local",
            run_as=(self.user.pw_uid, self.user.pw_gid))

    def victim_files(self) -> dict[str, str]:
        return {p.name: p.read_text() for p in self.victim.iterdir()}


@pytest.fixture
def run(user: pwd.struct_passwd) -> Iterator[Run]:
    base_dir = pathlib.Path(tempfile.mkdtemp(prefix="corral-links-more-"))
    base_dir.chmod(0o755)
    attempt = base_dir / "runs" / "job" / "attempt-1"
    for sub in ("logs", "ctl", "metrics"):
        (attempt / sub).mkdir(parents=True)
    os.chown(attempt, user.pw_uid, user.pw_gid)
    victim = base_dir / "victim"
    victim.mkdir(mode=0o700)
    (victim / "keep.txt").write_text(SECRET)
    yield Run(top=base_dir, attempt=attempt, victim=victim, user=user)
    shutil.rmtree(base_dir, ignore_errors=True)


@pytest.fixture
def rig(run: Run) -> Iterator[local_rig.Rig]:
    with local_rig.rigged(run.top) as r:
        yield r


@pytest.mark.parametrize("folder", ["logs", "ctl"])
def test_a_launch_writes_nothing_through_a_folder_made_a_link(
        run: Run, rig: local_rig.Rig, folder: str) -> None:
    """The task's log and its claim are made in the attempt's `logs/` and `ctl/`: made a
    link to a folder of root's, neither is made there, and the task does not start."""
    run.as_user(f"mv {folder} was-{folder} && ln -s {run.victim} {folder}")
    spec = run.spec()

    with pytest.raises(errors.LaunchError, match="refused"):
        rig.launch(rig.executor(), spec)

    assert run.victim_files() == {"keep.txt": SECRET}


def test_a_task_that_makes_its_ctl_folder_a_link_gets_no_exit_code_written_there(
        run: Run, rig: local_rig.Rig) -> None:
    """The claim's end is appended to the file its keeper created, not to what has its
    name when the task ends; the server has the end from the keeper itself (its pipe),
    not from a file of root's."""
    spec = run.spec(f"mv ctl was-ctl && ln -s {run.victim} ctl; exit 3")
    planted = run.victim / f"{spec.task}.{spec.launch_id}.claim"
    planted.write_text(f"{SECRET}\n")

    ex = rig.executor()
    status = local_rig.wait_status(ex, rig.launch(ex, spec))

    assert planted.read_text() == f"{SECRET}\n"
    kept = (run.attempt / "was-ctl" / planted.name).read_text().splitlines()
    assert kept[-1] == "3"  # the keeper's own claim, moved away, has the end
    assert (status.state, status.exit_code) == (base.State.EXITED, 3)
    # A restarted server, which has the end from the claim alone, finds a link there:
    # the end is unknown to it, not read from a file of root's.
    adopted = rig.executor().adopt(status.handle)
    assert adopted.state is base.State.LOST
    assert "claim file was replaced" in adopted.message
    assert planted.read_text() == f"{SECRET}\n"


def test_giving_a_launch_up_writes_nothing_through_a_ctl_folder_made_a_link(
        run: Run, rig: local_rig.Rig) -> None:
    """A restarted server claims a launch it finds no claim of (`abandoned`)."""
    run.as_user(f"mv ctl was-ctl && ln -s {run.victim} ctl")

    status = rig.executor().recover(run.spec())

    assert run.victim_files() == {"keep.txt": SECRET}
    assert status.state is base.State.LOST
    assert "control folder" in status.message


def test_a_claim_made_a_link_to_a_file_of_roots_is_not_read(
        run: Run, rig: local_rig.Rig) -> None:
    """`ctl/` is root's: the user puts a folder of its own in its place, with a link where
    the claim is read. What the file it leads to says (here: that the launch ran and
    exited 7) is not taken."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    (run.victim / "claim").write_text(f"{gone.pid}\n7\n")
    spec = run.spec()
    run.as_user(f"mv ctl was-ctl && mkdir ctl && "
                f"ln -s {run.victim}/claim ctl/{spec.task}.{spec.launch_id}.claim")

    status = rig.executor().recover(spec)

    assert status.state is base.State.LOST, status
    assert claims.read(claims.control_prefix(spec) + ".claim").refused


# --- what the server reads and copies of a job's folders, in a live server ------------------


@dataclasses.dataclass
class Place:
    top: pathlib.Path
    data: pathlib.Path  #: the storage root
    shared: pathlib.Path  #: in it, the folder the job's user owns
    private: pathlib.Path  #: in it too, a folder only root may enter
    secret_file: pathlib.Path  #: out of the roots, a file only root may read
    secret_dir: pathlib.Path  #: out of the roots, a folder only root may enter
    metrics: pathlib.Path  #: out of the roots, metrics only root may read
    metrics_log: pathlib.Path  #: ... and a log of root's with a metrics line


@pytest.fixture
def place(user: pwd.struct_passwd) -> Iterator[Place]:
    """Folders the job's user can reach (pytest's own tmp dirs are root's only)."""
    top = pathlib.Path(tempfile.mkdtemp(prefix="corral-links-more-"))
    top.chmod(0o755)
    p = Place(top=top, data=top / "data", shared=top / "data" / "shared",
              private=top / "data" / "private", secret_file=top / "secret.txt",
              secret_dir=top / "secret", metrics=top / "metrics.jsonl",
              metrics_log=top / "metrics.log")
    for folder in (p.data, p.shared, p.private, p.secret_dir):
        folder.mkdir(mode=0o755)
    os.chown(p.shared, user.pw_uid, user.pw_gid)
    (p.private / "key.txt").write_text(SECRET)
    p.private.chmod(0o700)
    (p.secret_dir / "key.txt").write_text(SECRET)
    p.secret_dir.chmod(0o700)
    p.secret_file.write_text(f"{SECRET}: a file of root\n")
    p.metrics.write_text('{"step": 1, "stolen": 42}\n')
    p.metrics_log.write_text(f"{SECRET}\ncorral:metrics step=1 stolen=42\n")
    for secret in (p.secret_file, p.metrics, p.metrics_log):
        secret.chmod(0o600)
    yield p
    shutil.rmtree(top, ignore_errors=True)


@pytest.fixture
def store() -> Iterator[s3.S3]:
    server = s3.start()
    yield server
    server.stop()


@pytest.fixture
def live(place: Place, user: pwd.struct_passwd, store: s3.S3) -> Iterator[conftest.Live]:
    server = conftest.start_live(place.top / "home", run_as=user.pw_name, s3=store.config,
                                 upload_retry_delay=0.1, storage_interval=0.2, storage={
                                     "roots": [str(place.data)],
                                     "open_default_project": False})
    yield server
    conftest.stop_live(server)


def script_job(place: Place, name: str, script: str, **overrides: Any) -> dict[str, Any]:
    """A job running `script` (sh) as the job's user; "$1" is its first argument."""
    path = place.top / f"{name}.sh"
    path.write_text(script)
    path.chmod(0o644)
    return factories.make_job(command=f"sh {path}", **overrides)


def run_to_end(live: conftest.Live, body: dict[str, Any]) -> str:
    """Submit a job, wait until it has completed and the server is done with it."""
    job = live.submit(body)["metadata"]["id"]
    assert live.wait(job)["status"]["phase"] == "Completed"
    factories.wait_for(lambda: helpers.finalized(live, job), what="the job to be finished")
    return str(job)


def events(live: conftest.Live, job_id: str) -> list[str]:
    r = live.http.get(live.path(f"/training-jobs/{job_id}/events"), params={"limit": 100})
    assert r.status_code == 200, r.text
    return [e["message"] for e in r.json()["events"]]


#: in a job's script: its attempt folder (the metrics file's is in it)
ATTEMPT = 'a=$(dirname "$(dirname "$CORRAL_METRICS_FILE")")\n'


@pytest.mark.parametrize("planted", ["the metrics file", "the log"])
def test_metrics_are_not_read_through_a_link_to_a_file_of_roots(
        live: conftest.Live, place: Place, planted: str) -> None:
    swap = (f'ln -s {place.metrics} "$CORRAL_METRICS_FILE"' if planted == "the metrics file"
            else f'mv "$a/logs" "$a/was-logs" && mkdir "$a/logs" && '
                 f'ln -s {place.metrics_log} "$a/logs/worker-0.log"')
    job = run_to_end(live, script_job(place, "metrics", ATTEMPT + swap + "\n"))

    r = live.http.get(live.path(f"/training-jobs/{job}/training-metrics"))
    assert r.status_code == 200, r.text
    assert r.json()["metrics"] == [], r.json()


def test_a_log_made_a_link_is_not_exported_to_object_storage(
        live: conftest.Live, place: Place, store: s3.S3) -> None:
    bucket = store.bucket()
    body = script_job(place, "export", ATTEMPT + (
        f'mv "$a/logs" "$a/was-logs" && mkdir "$a/logs" && '
        f'ln -s {place.secret_file} "$a/logs/worker-0.log"\n'))
    body["spec"]["log_export_path"] = {"obs_url": f"s3://{bucket}/logs/"}
    job = run_to_end(live, body)

    assert not any(SECRET.encode() in store.get(bucket, key)
                   for key in store.keys(bucket, "logs/"))
    assert any(e.startswith("Log export failed") and "refused" in e
               for e in events(live, job)), events(live, job)


def test_an_output_uploaded_to_object_storage_leaves_its_links_out(
        live: conftest.Live, place: Place, store: s3.S3) -> None:
    bucket = store.bucket()
    job = run_to_end(live, script_job(place, "upload", f"""o="${{1#--o=}}"
echo mine > "$o/mine.txt"
ln -s {place.secret_file} "$o/stolen.txt"
ln -s {place.secret_dir} "$o/stolen-dir"
""", outputs={"o": f"s3://{bucket}/out/"}))

    assert store.keys(bucket, "out/") == ["out/mine.txt"]
    said = events(live, job)
    assert any("stolen.txt: a link" in e and "not uploaded" in e for e in said), said


def registered_files(live: conftest.Live, job_id: str, name: str) -> dict[str, bytes]:
    where = pathlib.Path(live.settings.models_dir) / live.project_id / name / job_id
    return {p.relative_to(where).as_posix(): p.read_bytes()
            for p in where.rglob("*") if p.is_file()} if where.exists() else {}


def test_a_model_is_registered_without_the_links_in_its_output(
        live: conftest.Live, place: Place) -> None:
    body = script_job(place, "model", f"""o="${{1#--o=}}"
echo mine > "$o/mine.txt"
ln -s {place.secret_file} "$o/stolen.txt"
""", outputs={"o": str(place.shared / "model-out")})
    job = run_to_end(live, body)

    assert registered_files(live, job, body["metadata"]["name"]) == {"mine.txt": b"mine\n"}
    said = events(live, job)
    assert any(e.startswith("Model registered") for e in said), said
    assert any("stolen.txt: a link" in e and "left out" in e for e in said), said


@pytest.mark.parametrize("target", ["out of the roots", "a root-only folder in them"])
def test_an_output_folder_made_a_link_is_not_registered(
        live: conftest.Live, place: Place, target: str) -> None:
    """The job replaces its output folder with a link as it ends: the folder is checked
    against the roots, and read with its user's rights, as it is registered."""
    where = place.secret_dir if target == "out of the roots" else place.private
    out = place.shared / "model-out"
    body = script_job(place, "swap", f'mv {out} {out}-was && ln -s {where} {out}\n',
                      outputs={"o": str(out)})
    job = run_to_end(live, body)

    assert registered_files(live, job, body["metadata"]["name"]) == {}
    said = events(live, job)
    assert any(e.startswith("Model not registered") for e in said), said


def test_a_version_resumes_from_its_earlier_outputs_without_their_links(
        live: conftest.Live, place: Place) -> None:
    out = place.shared / "resume-out"
    first = run_to_end(live, script_job(place, "first", f"""o="${{1#--o=}}"
case "$o" in */V0002) exit 0;; esac  # the later version only starts from them
echo mine > "$o/mine.txt"
ln -s {place.secret_file} "$o/stolen.txt"
""", outputs={"o": str(out)}))

    second = helpers.post(live, f"/training-jobs/{first}/versions",
                          {"resume": True})["metadata"]["id"]
    assert live.wait(second)["status"]["phase"] == "Completed"

    assert (out / "V0002" / "mine.txt").read_text() == "mine\n"
    assert not (out / "V0002" / "stolen.txt").exists()
    said = events(live, second)
    assert any("stolen.txt: a link" in e and "not copied" in e for e in said), said
