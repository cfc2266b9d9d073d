"""Jobs in an image (`engine.image_url`): the references taken, the refusals at submit that
say what is missing, and the exact `podman run` command line of a task."""

from __future__ import annotations

import os
import pathlib
import stat

import pytest

from corral import settings as settings_mod
from corral.domain import containers, errors, resources, specs
from corral.scheduler import launching
from corral.services import catalog as catalog_mod
from corral.services import submit
from corral.storage import runs
from tests import factories

IMAGE = "swr.cn-north-4.myhuaweicloud.com/team/train:1.0"
ENGINE = settings_mod.EngineConfig(engine_id="py", python="/usr/bin/python3")


@pytest.mark.parametrize("image", [
    IMAGE, "busybox", "localhost:5000/team/train", "library/ubuntu:22.04",
    "ghcr.io/a-b/c__d.e:v1_2-3", "team/train@sha256:" + "a" * 64,
])
def test_image_references_as_registries_write_them_are_taken(image: str) -> None:
    containers.check_reference(image)


@pytest.mark.parametrize("image", [
    "oci:/var/lib/secret", "docker-archive:/tmp/x.tar", "containers-storage:x", "dir:x",
    "--privileged", "-v/:/host", "Team/Train", "a b", "x:", "x@sha256:abc", "/abs/path",
])
def test_anything_else_is_refused(image: str) -> None:
    with pytest.raises(ValueError, match="not an image reference"):
        containers.check_reference(image)


def engine_body(**engine: object) -> dict[str, object]:
    body = factories.make_job(command="true")
    body["algorithm"]["engine"] = engine
    return body


@pytest.mark.parametrize(("extra", "says"), [
    ({"engine_id": "py"}, "without engine.engine_id"),
    ({"engine_name": "PyTorch", "engine_version": "2"},
     "engine.engine_name, engine.engine_version"),
    ({"requirements": ["six"]}, "without engine.requirements"),
])
def test_an_image_is_the_whole_environment(extra: dict[str, object], says: str) -> None:
    specs.JobCreate.model_validate(engine_body(image_url=IMAGE))
    with pytest.raises(ValueError, match=says):
        specs.JobCreate.model_validate(engine_body(image_url=IMAGE, **extra))


def catalog(runtime: str | None = "podman", **kw: object) -> catalog_mod.Catalog:
    return catalog_mod.Catalog(nodes=(), flavors=(), engines=(ENGINE,), default_flavor="",
                               pool_ids=("default", "ray"),
                               pool_executor={"ray": "ray:ray://head:10001"},
                               container_runtime=runtime, **kw)  # type: ignore[arg-type]


@pytest.fixture
def podman(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A `podman` on PATH (and nothing else there)."""
    program = tmp_path / "bin" / "podman"
    program.parent.mkdir()
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    monkeypatch.setenv("PATH", str(program.parent))
    return str(program)


def test_a_server_not_set_up_for_images_refuses_them_saying_what_is_missing(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = specs.Engine(image_url=IMAGE)
    with pytest.raises(errors.BadParameter,
                       match="needs container_runtime = 'podman' in the server's settings"):
        submit.check_image(catalog(None), engine)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(errors.BadParameter, match="podman is not installed on this machine"):
        submit.check_image(catalog(), engine)


def test_images_run_on_this_machine_with_gpus_only(podman: str) -> None:
    engine = specs.Engine(image_url=IMAGE)
    npu = resources.Flavor(flavor_id="npu.1", flavor_name="npu.1", cpu=1, memory_gb=1,
                           accelerators=(resources.Accelerator("npu", 1),))

    submit.check_image(catalog(), engine, pool="default")
    submit.check_image(catalog(), specs.Engine(engine_id="py"), pool="ray")  # no image
    with pytest.raises(errors.BadParameter, match="pool 'ray', which runs on a Ray cluster"):
        submit.check_image(catalog(), engine, pool="ray")
    with pytest.raises(errors.BadParameter, match="gives npu devices"):
        submit.check_image(catalog(), engine, pool="default", flavor=npu)


def test_the_command_line_of_a_task_in_an_image() -> None:
    run = containers.Run(
        program="/usr/bin/podman", image=IMAGE, name="corral-0123abcd",
        argv=("python3", "/runs/j/attempt-1/code/train.py", "--lr=0.1"), shell=False,
        cwd="/runs/j/attempt-1/code", env_file="/runs/j/containers/0123abcd.env",
        mounts=("/runs/j/attempt-1", "/runs/j/attempt-1/code", "/data/in", "/data/out/",
                "/data/in/part"),
        gpu_ids=(2, 5), user=(1000, 1001), memory_mb=4096, options=("--runtime=runc",))

    assert containers.run_argv(run) == (
        "/usr/bin/podman", "run", "--rm", "--init", "--name=corral-0123abcd",
        "--network=host", "--ipc=host", "--workdir=/runs/j/attempt-1/code",
        "--env-file=/runs/j/containers/0123abcd.env",
        "--volume=/data/in:/data/in", "--volume=/data/out:/data/out",
        "--volume=/runs/j/attempt-1:/runs/j/attempt-1",
        "--device=nvidia.com/gpu=2", "--device=nvidia.com/gpu=5", "--user=1000:1001",
        "--memory=4096m", "--memory-swap=4096m", "--runtime=runc", IMAGE,
        "python3", "/runs/j/attempt-1/code/train.py", "--lr=0.1")


def test_a_command_runs_in_the_images_shell_with_its_arguments() -> None:
    run = containers.Run(program="podman", image="busybox", name="corral-1", argv=(
        "echo $1 | cat", "--data=/d"), shell=True, cwd="/w", env_file="/e", mounts=("/w",))

    assert containers.run_argv(run)[-6:] == (
        "busybox", "/bin/sh", "-c", 'trap : TERM INT HUP; echo $1 | cat "$@"', "sh",
        "--data=/d")


def test_what_podman_cannot_be_given_is_refused() -> None:
    run = containers.Run(program="podman", image="busybox", name="corral-1", argv=("true",),
                         shell=False, cwd="/w", env_file="/e", mounts=("/data:2024",))
    with pytest.raises(ValueError, match="a ':' in its path"):
        containers.run_argv(run)
    with pytest.raises(ValueError, match="'TOKEN' holds a line break"):
        containers.env_file({"TOKEN": "a\nb"})
    assert containers.env_file({"B": "x y=z", "A": ""}) == "A=\nB=x y=z\n"


def test_a_launch_in_an_image_gives_podman_the_servers_environment_and_the_task_the_rest(
        tmp_path: pathlib.Path, podman: str) -> None:
    body = factories.make_job(code_dir="/src", environments={"WANDB_API_KEY": "k",
                                                             "LD_PRELOAD": "/tmp/x.so"})
    body["algorithm"]["engine"] = {"image_url": IMAGE}
    job = specs.JobCreate.model_validate(body)
    paths = runs.RunPaths(tmp_path / "runs", "job1")
    code = paths.code_dir(1)
    code.mkdir(parents=True)
    (code / "train.py").write_text("")
    cat = catalog(container_options=("--runtime=runc",))

    ls = launching.launch_spec(
        paths=paths, cat=cat, spec=job, job_id="job1", attempt=1, task="worker-0", rank=0,
        launch_id="0123abcd", node="local", gpu_ids=[3], master_port=29500, code=code,
        cwd=code, inherited={"PATH": "/usr/bin", "HOME": "/root"}, run_as=(1000, 1000),
        demand=resources.Resources(cpu=1, memory_mb=512))

    env_path = paths.job_dir / "containers" / "0123abcd.env"
    assert ls.argv[:2] == (podman, "run")
    assert f"--env-file={env_path}" in ls.argv and "--user=1000:1000" in ls.argv
    assert f"--volume={paths.attempt_dir(1)}:{paths.attempt_dir(1)}" in ls.argv
    assert ls.argv[-3:] == (IMAGE, "python3", str(code / "train.py"))
    assert not ls.shell and ls.run_as is None  # podman runs as the server; the task as 1000
    assert ls.env == {"PATH": "/usr/bin", "HOME": "/root", "CUDA_VISIBLE_DEVICES": "3"}
    assert ls.cleanup == (podman, "rm", "--force", "--ignore", "corral-0123abcd")
    given = dict(line.split("=", 1) for line in env_path.read_text().splitlines())
    assert given["WANDB_API_KEY"] == "k" and given["LD_PRELOAD"] == "/tmp/x.so"
    assert given["CORRAL_JOB_ID"] == "job1" and given["CORRAL_LAUNCH_ID"] == "0123abcd"
    assert given["CUDA_VISIBLE_DEVICES"] == "0" and "PATH" not in given
    assert stat.S_IMODE(env_path.stat().st_mode) == 0o600
    assert env_path.stat().st_uid == os.geteuid()


def test_a_folder_reached_through_a_link_is_not_bound(tmp_path: pathlib.Path,
                                                      podman: str) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    body = factories.make_job(command="true", outputs={"out": str(tmp_path / "link")})
    body["algorithm"]["engine"] = {"image_url": IMAGE}
    job = specs.JobCreate.model_validate(body)
    job.algorithm.outputs[0].local_dir = str(tmp_path / "link")
    paths = runs.RunPaths(tmp_path / "runs", "job1")
    paths.attempt_dir(1).mkdir(parents=True)

    with pytest.raises(errors.LaunchError, match="reached through a link"):
        launching.launch_spec(
            paths=paths, cat=catalog(), spec=job, job_id="job1", attempt=1, task="worker-0",
            rank=0, launch_id="0123abcd", node="local", gpu_ids=[], master_port=29500,
            code=None, cwd=paths.attempt_dir(1), inherited={})
