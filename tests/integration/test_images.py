"""Jobs that give `engine.image_url` run in that image with podman: a live server, real
podman, and an image made here (`podman import` of a root file system holding a static
busybox). Without podman (or a static busybox) these are skipped, or failed under CI=true:
.ci/run installs both."""

from __future__ import annotations

import os
import pathlib
import pwd
import shutil
import struct
import subprocess
import tarfile
import tempfile
import uuid
from collections.abc import Iterator

import pytest
from huaweicloudsdkmodelarts.v1 import model as ma

from corral.domain import containers
from corral.executors.local import processes
from tests import conftest, factories
from tests.api import test_sdk

Live = conftest.Live
BUSYBOX = "/bin/busybox"
#: the busybox commands the image's jobs call
APPLETS = ("sh", "echo", "cat", "id", "pwd", "sleep", "test", "[", "env", "touch")


def _missing(why: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{why}, and CI=true (.ci/run installs podman, runc and busybox-static)")
    pytest.skip(f"{why} (Debian: apt-get install podman runc busybox-static)")


def static(path: str) -> bool:
    """Whether the ELF file at `path` needs no dynamic loader (it has no PT_INTERP)."""
    with open(path, "rb") as fh:
        head = fh.read(64)
        if head[:4] != b"\x7fELF" or head[4] != 2:  # 64-bit only
            return False
        phoff, = struct.unpack_from("<Q", head, 32)
        size, count = struct.unpack_from("<HH", head, 54)
        fh.seek(phoff)
        table = fh.read(size * count)
    return all(struct.unpack_from("<I", table, i * size)[0] != 3 for i in range(count))


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """An image of busybox alone, imported into podman's store for these tests."""
    if shutil.which("podman") is None:
        _missing("podman is not installed")
    if os.geteuid() != 0:
        _missing("these tests run podman as root, as a root server does")
    if not os.path.exists(BUSYBOX) or not static(BUSYBOX):
        _missing(f"no static busybox at {BUSYBOX}")
    root = tmp_path_factory.mktemp("rootfs")
    (root / "bin").mkdir()
    shutil.copy(BUSYBOX, root / "bin" / "busybox")
    for applet in APPLETS:
        (root / "bin" / applet).symlink_to("busybox")
    for folder in ("tmp", "proc", "sys", "dev", "etc"):
        (root / folder).mkdir()
    tar = root.parent / "rootfs.tar"
    with tarfile.open(tar, "w") as out:
        out.add(root, arcname=".")
    name = f"localhost/corral-test-{uuid.uuid4().hex[:8]}:1"
    subprocess.run(["podman", "import", str(tar), name], check=True, capture_output=True)
    yield name
    subprocess.run(["podman", "rmi", "--force", name], capture_output=True)


def options() -> list[str]:
    """What `podman run` needs on machines like this project's: runc (crun refuses a
    hybrid cgroup layout), and limits no higher than the server's own (podman's defaults
    raise them, which a sandboxed root may not)."""
    runc = ["--runtime=runc"] if shutil.which("runc") else []
    return [*runc, "--ulimit=nofile=1024:1024", "--ulimit=nproc=1024:1024"]


@pytest.fixture
def live(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Live]:
    monkeypatch.setenv("SERVER_ONLY", "the server's")
    live = conftest.start_live(tmp_path / "home", container_runtime="podman",
                               container_options=options())
    yield live
    conftest.stop_live(live)


def in_image(image: str, command: str, **kw: object) -> dict[str, object]:
    body = factories.make_job(command=command, **kw)  # type: ignore[arg-type]
    body["algorithm"]["engine"] = {"image_url": image}
    return body


def log_of(live: Live, job_id: str) -> str:
    r = live.http.get(live.path(f"/training-jobs/{job_id}/tasks/worker-0/logs/preview"))
    assert r.status_code == 200, r.text
    return str(r.json()["content"])


def launches(live: Live, job_id: str) -> list[str]:
    """The launch ids of the job's tasks, from their environment files' names."""
    folder = live.settings.runs_dir / job_id / "containers"
    return [p.name.removesuffix(".env") for p in folder.glob("*.env")]


def left(launch_ids: list[str]) -> list[str]:
    """The containers of these launches that podman still has."""
    out = subprocess.run(["podman", "ps", "--all", "--format", "{{.Names}}"],
                         capture_output=True, text=True, check=True).stdout.split()
    return [n for n in out if n in {containers.container_name(i) for i in launch_ids}]


def test_a_job_runs_in_its_image_with_its_folders_and_environment(
        image: str, live: Live, tmp_path: pathlib.Path) -> None:
    out = tmp_path / "out"
    command = ("test -e /usr/bin/python3 || echo in-image; echo made > $OUT_DIR/made.txt; "
               "echo job=$CORRAL_JOB_ID rank=$RANK given=$GIVEN server=${SERVER_ONLY:-none}; "
               "echo gpus=[$CUDA_VISIBLE_DEVICES] args=\"$*\"; echo")  # (args: "$@")
    job = live.submit(in_image(image, command, outputs={"out": str(out)},
                               environments={"GIVEN": "a b=c", "OUT_DIR": str(out)}))
    job_id = job["metadata"]["id"]

    done = live.wait(job_id, timeout=60)

    log = log_of(live, job_id)
    assert done["status"]["phase"] == "Completed", log
    assert "in-image" in log  # the host's files are not there
    assert f"job={job_id} rank=0 given=a b=c server=none" in log
    assert f"args=--out={out}" in log
    assert "gpus=[]" in log
    assert (out / "made.txt").read_text() == "made\n"  # the output folder is bound
    ids = launches(live, job_id)
    assert len(ids) == 1 and not left(ids)
    env_file = live.settings.runs_dir / job_id / "containers" / f"{ids[0]}.env"
    assert env_file.stat().st_mode & 0o777 == 0o600
    events = live.http.get(live.path(f"/training-jobs/{job_id}/events")).json()["events"]
    assert any(f"image {image}" in e["message"] for e in events)


def test_a_stopped_job_leaves_no_container_even_one_that_ignores_sigterm(
        image: str, live: Live) -> None:
    command = "trap '' TERM; echo started; while true; do sleep 1; done"
    job_id = live.submit(in_image(image, command))["metadata"]["id"]
    factories.wait_for(lambda: "started" in log_of(live, job_id), timeout=60,
                       what="the container to start")
    ids = launches(live, job_id)
    assert left(ids)

    r = live.http.post(live.path(f"/training-jobs/{job_id}/actions"),
                       json={"action_type": "terminate"})
    assert r.status_code in (200, 202), r.text
    done = live.wait(job_id, timeout=60)

    assert done["status"]["phase"] == "Terminated"
    factories.wait_for(lambda: not left(ids), timeout=30, what="its container to go")
    assert not processes.marked(ids[0])  # nothing it ran lives on


def test_a_stop_gives_sigterm_to_the_program_a_command_runs_in_the_container(
        image: str, tmp_path: pathlib.Path) -> None:
    # The command's shell outlives a SIGTERM, and podman passes one to the container's
    # init, which passes it to that shell alone: the program it runs must get its own.
    program = "trap 'echo got-term; exit 0' TERM; echo started; while :; do sleep 1; done"
    live = conftest.start_live(tmp_path / "home", container_runtime="podman",
                               container_options=options(), grace_period=30.0)
    try:
        job_id = live.submit(in_image(image, f"sh -c \"{program}\""))["metadata"]["id"]
        factories.wait_for(lambda: "started" in log_of(live, job_id), timeout=60,
                           what="the container to start")
        r = live.http.post(live.path(f"/training-jobs/{job_id}/actions"),
                           json={"action_type": "terminate"})
        assert r.status_code in (200, 202), r.text
        done = live.wait(job_id, timeout=20)  # well within the 30 s of grace
        log = log_of(live, job_id)
    finally:
        conftest.stop_live(live)

    assert done["status"]["phase"] == "Terminated"
    assert "got-term" in log


def test_a_job_made_from_an_algorithm_in_an_image_runs_in_it(image: str, live: Live) -> None:
    algorithm = {"metadata": {"name": "in-image"}, "job_config": {
        "command": "test -e /usr/bin/python3 || echo in-image", "engine": {"image_url": image}}}
    r = live.http.post(live.path("/algorithms"), json=algorithm)
    assert r.status_code == 201, r.text
    body = factories.make_job()
    body["algorithm"] = {"id": r.json()["metadata"]["id"]}

    job_id = live.submit(body)["metadata"]["id"]
    done = live.wait(job_id, timeout=60)

    assert done["status"]["phase"] == "Completed"
    assert done["algorithm"]["engine"] == {"image_url": image}
    assert "in-image" in log_of(live, job_id)


def test_the_modelarts_sdk_runs_a_job_in_an_image(image: str, live: Live) -> None:
    sdk = test_sdk.connect(live)
    body = test_sdk.sdk_job("sdk-in-image", command="test -e /usr/bin/python3 || echo in-image")
    body.algorithm.engine = ma.JobEngine(image_url=image)

    made = sdk.call("create_training_job", ma.CreateTrainingJobRequest(body=body))
    done = sdk.wait(made.metadata.id, {"Completed", "Failed"}, timeout=60)

    assert done.status.phase == "Completed"
    assert done.algorithm.engine.image_url == image and done.algorithm.engine.engine_id is None
    assert "in-image" in log_of(live, made.metadata.id)


def test_an_image_that_cannot_be_found_fails_the_job_saying_so(image: str, live: Live) -> None:
    job_id = live.submit(in_image("localhost/corral-test-none:1", "echo hi"))["metadata"]["id"]

    done = live.wait(job_id, timeout=60)

    assert done["status"]["phase"] == "Failed"
    assert "corral-test-none" in log_of(live, job_id)


def test_a_job_runs_in_its_image_as_the_run_as_user(image: str) -> None:
    nobody = pwd.getpwnam("nobody")
    top = pathlib.Path(tempfile.mkdtemp(prefix="corral-image-"))  # (one nobody can reach)
    top.chmod(0o755)
    live = conftest.start_live(top / "home", run_as="nobody", container_runtime="podman",
                               container_options=options())
    try:
        out = top / "out"
        command = ('id -u; echo made > "${1#--o=}"/result.txt; '
                   'touch "$CORRAL_METRICS_FILE" && echo metrics-kept; echo')
        job_id = live.submit(in_image(image, command, outputs={"o": str(out)}))["metadata"]["id"]
        done = live.wait(job_id, timeout=60)
        log = log_of(live, job_id)
        result = out / "result.txt"
        owner = result.stat().st_uid if result.exists() else None
    finally:
        conftest.stop_live(live)
        shutil.rmtree(top, ignore_errors=True)

    assert done["status"]["phase"] == "Completed", log
    assert log.split()[:1] == [str(nobody.pw_uid)]
    assert "metrics-kept" in log  # its metrics folder is bound, and its user's
    assert owner == nobody.pw_uid  # its output folder too
