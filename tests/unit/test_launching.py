"""Which command lines run as one program directly, and which need /bin/sh."""

from __future__ import annotations

import os
import pathlib

import pytest

from corral.domain import resources, specs
from corral.scheduler import launching
from corral.services import catalog
from tests import factories
from tests.conftest import make_settings

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


def test_a_command_is_looked_up_on_path_at_each_launch(tmp_path: pathlib.Path) -> None:
    """A command line's words are kept once parsed, but where its program is is not: one
    installed or removed meanwhile is found or not at the next launch."""
    path = f"{tmp_path}:{PATH}"
    assert launching.simple_command("corral-test-prog --x=1", path) is None
    prog = tmp_path / "corral-test-prog"
    prog.write_text("#!/bin/sh\n")
    prog.chmod(0o755)
    assert launching.simple_command("corral-test-prog --x=1", path) == [
        "corral-test-prog", "--x=1"]
    prog.unlink()
    assert launching.simple_command("corral-test-prog --x=1", path) is None


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


def test_a_task_sees_only_the_accelerator_devices_it_was_given(tmp_path: pathlib.Path) -> None:
    """Like CUDA_VISIBLE_DEVICES: each accelerator of the node gets its variable, empty for
    a task that was given none of it."""
    node = resources.Node("local", cpu=4, memory_mb=8192, accelerators=(
        resources.Accelerator("npu", 4), resources.Accelerator("tpu-v4", 2)))
    settings = make_settings(tmp_path, accelerators={"tpu-v4": {"visible_env": "TPU_CHIPS"}})
    cat = catalog.Catalog.build(settings, [node])
    assert launching.devices_env(cat, "local", (("npu", (1, 3)),)) == {
        "ASCEND_RT_VISIBLE_DEVICES": [1, 3], "TPU_CHIPS": []}
    assert launching.visible_env("fpga.x") == "FPGA_X_VISIBLE_DEVICES"
    body = specs.JobCreate.model_validate(factories.make_job(command="true"))
    env = launching.task_env(inherited={}, alg=body.algorithm, job_id="j", task="worker-0",
                             rank=0, world=1, attempt=1, master_port=1, gpu_ids=[],
                             devices=launching.devices_env(cat, "local", (("npu", (2,)),)))
    assert env["ASCEND_RT_VISIBLE_DEVICES"] == "2" and env["TPU_CHIPS"] == ""
    assert env["CUDA_VISIBLE_DEVICES"] == ""


def test_what_a_task_reads_is_its_inputs_where_fetched_and_its_model() -> None:
    body = factories.make_job(command="true", inputs={"a": "/data/a", "b": "s3://bkt/b"},
                              parameters={"model_url": "/models/m/1", "lr": "0.1"})
    spec = specs.JobCreate.model_validate(body)
    spec.algorithm.inputs[1].local_dir = "/runs/j/inputs/b"  # where it was fetched to
    assert launching.input_paths(spec) == ("/data/a", "/runs/j/inputs/b")
    spec.model = specs.ModelRef(name="m", version=1)  # model_url is then the model's folder
    assert launching.input_paths(spec) == ("/data/a", "/runs/j/inputs/b", "/models/m/1")


def test_an_attempt_gets_its_directories_each_made_once(tmp_path: pathlib.Path) -> None:
    from corral.storage import runs

    paths = runs.RunPaths(tmp_path / "runs", "job-1")  # not even the runs dir exists
    alg = specs.Algorithm(command="true")
    for attempt in (1, 1, 2):  # a relaunch of the same attempt finds them made
        code, cwd = launching.prepare_attempt(paths, attempt, alg)
        assert code is None and cwd == paths.attempt_dir(attempt)
        for made in (paths.log_path(attempt, "w"), paths.metrics_path(attempt, "w"),
                     paths.control_dir(attempt) / "x"):
            assert made.parent.is_dir()
    assert sorted(p.name for p in paths.job_dir.iterdir()) == ["attempt-1", "attempt-2"]


def test_values_naming_a_channel_in_object_storage_name_its_local_copy(
        tmp_path: pathlib.Path) -> None:
    body = factories.make_job(
        command="true", inputs={"deploy_url": "s3://b/loop/deploy",
                                "data_url": "s3://b/loop/rounds/1/train.txt"},
        outputs={"service_url": "s3://b/loop/deploy/service"},
        parameters={"model_url": "s3://b/loop/deploy/models/m-v1", "lr": "0.1"},
        environments={"CONFIG": "s3://b/loop/deploy/model_config.json",
                      "ACK": "s3://b/loop/deploy/service/ack.json",
                      "DATA": "s3://b/loop/rounds/1/train.txt",
                      "BOTH": "s3://b/loop/deploy/a;s3://b/elsewhere", "OTHER": "s3://b/x"})
    spec = specs.JobCreate.model_validate(body)
    deploy, data, service = tmp_path / "deploy", tmp_path / "data", tmp_path / "service"
    data.mkdir()
    (data / "train.txt").write_text("1\n")  # one object is fetched into a folder
    spec.algorithm.inputs[0].local_dir, spec.algorithm.inputs[1].local_dir = str(deploy), str(data)
    spec.algorithm.outputs[0].local_dir = str(service)
    env = launching.task_env(inherited={}, alg=spec.algorithm, job_id="j", task="worker-0",
                             rank=0, world=1, attempt=1, master_port=1, gpu_ids=[])
    assert env["CONFIG"] == f"{deploy}/model_config.json"
    assert env["ACK"] == f"{service}/ack.json"  # the longest channel that holds it
    assert env["DATA"] == str(data / "train.txt")
    assert env["BOTH"] == f"{deploy}/a;s3://b/elsewhere"
    assert env["OTHER"] == "s3://b/x"  # in no channel: as it was
    assert f"--model_url={deploy}/models/m-v1" in launching.job_args(spec.algorithm)
