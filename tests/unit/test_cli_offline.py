"""The CLI against a fake server answered in-process: output, errors and job-file handling.

The same commands against a real server are in tests/api/test_cli.py.
"""

from __future__ import annotations

import json
import pathlib
import re
import socket
import uuid
from collections.abc import Iterator
from typing import Any

import click
import httpx
import pydantic
import pytest
import rich.console
import yaml
from click import testing

from corral import settings as settings_mod
from corral.cli import algorithms as cli_algorithms
from corral.cli import demo, il, jobfile, lookup, main, render, state
from corral.domain import resources
from corral.sdk import client

ROOT = pathlib.Path(__file__).parents[2]
EXAMPLES = ROOT / "examples"


def make_job(**overrides: Any) -> dict[str, Any]:
    job: dict[str, Any] = {
        "kind": "job",
        "metadata": {"id": str(uuid.uuid4()), "name": "mlp", "create_time": 1_700_000_000_000},
        "status": {
            "phase": "Running",
            "secondary_phase": "Running",
            "duration": 65_000,
            "start_time": 1_700_000_001_000,
            "tasks": ["worker-0"],
            "task_statuses": [],
            "running_records": [],
            "reason": None,
        },
        "algorithm": {"code_dir": "/code", "boot_file": "/code/train.py", "parameters": []},
        "spec": {"resource": {"flavor_id": "corral.cpu.1u", "node_count": 1}},
    }
    for key, value in overrides.items():
        job[key] = {**job[key], **value}
    return job


class FakeCorral:
    """Just enough of the server for the CLI: jobs kept in a dict, one log per job."""

    def __init__(self) -> None:
        self.jobs: dict[str, dict[str, Any]] = {}
        self.logs: dict[str, str] = {}
        #: phases a job moves through, one per GET, the last one repeating
        self.phases: dict[str, list[str]] = {}
        self.requests: list[tuple[str, str, Any]] = []

    def add(self, job: dict[str, Any], log: str = "", phases: tuple[str, ...] = ()) -> str:
        job_id = job["metadata"]["id"]
        self.jobs[job_id], self.logs[job_id], self.phases[job_id] = job, log, list(phases)
        return job_id

    def __call__(self, req: httpx.Request) -> httpx.Response:
        body: Any = json.loads(req.content) if req.content else None
        self.requests.append((req.method, req.url.path, body))
        parts = req.url.path.removeprefix("/v2/p1/").split("/")
        if req.url.path == "/corral/info":
            return ok(
                {
                    "version": "0.1.0",
                    "default_project_id": "p1",
                    "database": "sqlite",
                    "home": "/h",
                    "nodes": [{"name": "local", "cpu": 4, "memory_mb": 24105,
                               "accelerators": {}}],
                }
            )
        if parts == ["training-jobs"] and req.method == "POST":
            job = make_job(metadata={**body["metadata"], "id": "new-1"})
            return ok(job, 201)
        if parts == ["training-job-searches"]:
            items = [j for j in self.jobs.values() if all(matches(j, f) for f in body["filters"])]
            return ok({"total": len(items), "count": len(items), "items": items})
        if parts == ["training-pools"]:
            return ok({"pools": [POOL]})
        if parts == ["training-quotas"]:
            return ok({"quotas": [{"pool_id": "default", "limits": {"memory_gb": 8},
                                   "used": {"cpu": 1, "memory_gb": 1.5, "gpu": 0},
                                   "borrowing": False, "weight": 1.0}]})
        if parts == ["training-job-flavors"]:
            return ok(
                {
                    "total_count": 1,
                    "flavors": [
                        {
                            "flavor_id": "corral.cpu.1u",
                            "flavor_name": "1 CPU",
                            "max_num": 1,
                            "flavor_type": "CPU",
                            "flavor_info": {
                                "cpu": {"core_num": 1},
                                "memory": {"size": 2, "unit": "GB"},
                            },
                        }
                    ],
                }
            )
        if parts[0] == "training-jobs" and len(parts) > 1 and parts[1] in self.jobs:
            return self.job_route(parts[1], parts[2:], req)
        return httpx.Response(
            404,
            json={
                "error_code": "ModelArts.2775",
                "error_msg": f"training job '{parts[-1]}' does not exist",
            },
        )

    def job_route(self, job_id: str, rest: list[str], req: httpx.Request) -> httpx.Response:
        job = self.jobs[job_id]
        if not rest and req.method == "DELETE":
            return ok({}, 202)
        if rest == ["actions"]:
            job["status"]["phase"] = job["status"]["secondary_phase"] = "Terminating"
            return ok(job, 202)
        if not rest:
            if self.phases[job_id]:
                phase = (
                    self.phases[job_id].pop(0)
                    if len(self.phases[job_id]) > 1
                    else self.phases[job_id][0]
                )
                job["status"]["phase"] = job["status"]["secondary_phase"] = phase
            return ok(job)
        if rest[-1] == "logs":
            text, offset = self.logs[job_id], int(req.url.params["offset"])
            content = text[offset : offset + 10]
            return ok(
                {
                    "content": content,
                    "offset": offset,
                    "next_offset": offset + len(content),
                    "full_size": len(text),
                    "attempt": 1,
                }
            )
        if rest[0] == "events":
            return ok(
                {
                    "total": 1,
                    "events": [
                        {
                            "message": "job created",
                            "level": "Info",
                            "time": 1_700_000_000_000,
                            "source": "corral",
                        }
                    ],
                }
            )
        raise AssertionError(f"unexpected {req.method} {req.url.path}")


def ok(body: dict[str, Any], status: int = 200) -> httpx.Response:
    return httpx.Response(status, json=body)


def matches(job: dict[str, Any], f: dict[str, Any]) -> bool:
    """The search API's filters, as far as the CLI uses them."""
    value = job["metadata"]["name"] if f["key"] == "name" else job["status"][f["key"]]
    if f["operator"] == "like":
        return any(v in value for v in f["value"])
    return value in f["value"]


POOL = {
    "pool_id": "default", "executor": "local", "address": None,
    "nodes": [{"name": "local", "cpu": 2.0, "memory_gb": 23.54, "gpu": 0}],
    "capacity": {"cpu": 2.0, "memory_gb": 23.54, "gpu": 0},
    "used": {"cpu": 1.0, "memory_gb": 11.0, "gpu": 0}, "pending_jobs": 0,
    "projects": [{"project_id": "p1", "name": "default", "limits": None,
                  "used": {"cpu": 1.0, "memory_gb": 11.0, "gpu": 0}, "borrowing": False,
                  "weight": 1.0, "recent_share": 0.5}],
}


@pytest.fixture
def fake() -> FakeCorral:
    return FakeCorral()


@pytest.fixture
def invoke(fake: FakeCorral, tmp_path: pathlib.Path) -> Any:
    def run(*args: str) -> testing.Result:
        api = client.Client("http://corral.test", "p1", transport=httpx.MockTransport(fake))
        obj = state.State(settings_mod.load(home=tmp_path), api=api)
        return testing.CliRunner().invoke(main.cli, list(args), obj=obj)

    return run


def assert_one_error_line(result: testing.Result, text: str) -> None:
    assert result.exit_code == 1, result.output
    assert result.stderr.splitlines() == [f"error: {text}"]
    assert "Traceback" not in result.output


# -- job files ------------------------------------------------------------------------------


def test_relative_paths_are_taken_from_the_job_files_folder(tmp_path: pathlib.Path) -> None:
    body = {
        "algorithm": {
            "code_dir": "code/",
            "boot_file": "train.py",
            "inputs": [{"name": "data_url", "remote": {"obs": {"obs_url": "../data"}}}],
            "outputs": [
                {"name": "train_url", "remote": {"obs": {"obs_url": "./out/"}}},
                {"name": "s3", "remote": {"obs": {"obs_url": "s3://bucket/out/"}}},
                {"name": "abs", "remote": {"obs": {"obs_url": "/srv/out"}}},
            ],
        },
        "spec": {"log_export_path": {"host_path": "logs"}},
    }

    resolved = jobfile.resolve_paths(body, tmp_path / "jobs")

    algo = resolved["algorithm"]
    assert algo["code_dir"] == f"{tmp_path}/jobs/code/"
    assert algo["boot_file"] == f"{tmp_path}/jobs/code/train.py"
    assert algo["inputs"][0]["remote"]["obs"]["obs_url"] == f"{tmp_path}/data"
    urls = [o["remote"]["obs"]["obs_url"] for o in algo["outputs"]]
    assert urls == [f"{tmp_path}/jobs/out/", "s3://bucket/out/", "/srv/out"]
    assert resolved["spec"]["log_export_path"]["host_path"] == f"{tmp_path}/jobs/logs"
    assert body["algorithm"]["code_dir"] == "code/"  # the caller's body is left alone


def test_a_boot_file_in_remote_code_is_the_servers_to_resolve(tmp_path: pathlib.Path) -> None:
    body = {"algorithm": {"code_dir": "s3://b/code/", "boot_file": "train.py"}}

    assert jobfile.resolve_paths(body, tmp_path)["algorithm"] == body["algorithm"]


def test_submit_sends_the_yaml_body_with_resolved_paths(
    fake: FakeCorral, invoke: Any, tmp_path: pathlib.Path
) -> None:
    job_file = tmp_path / "job.yaml"
    job_file.write_text(
        "kind: job\nmetadata: {name: mlp}\n"
        "algorithm: {code_dir: ., boot_file: train.py,\n"
        "  outputs: [{name: train_url, remote: {obs: {obs_url: ./output}}}]}\n"
    )

    result = invoke("submit", str(job_file), "--json")

    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["metadata"]["id"] == "new-1"
    method, path, sent = fake.requests[-1]
    assert (method, path) == ("POST", "/v2/p1/training-jobs")
    assert sent["algorithm"]["code_dir"] == str(tmp_path)
    assert sent["algorithm"]["boot_file"] == str(tmp_path / "train.py")
    assert sent["algorithm"]["outputs"][0]["remote"]["obs"]["obs_url"] == str(tmp_path / "output")


def test_submit_without_json_says_how_to_follow_the_job(
    invoke: Any, tmp_path: pathlib.Path
) -> None:
    job_file = tmp_path / "job.json"
    job_file.write_text('{"metadata": {"name": "mlp"}, "algorithm": {"command": "true"}}')

    result = invoke("submit", str(job_file))

    assert result.exit_code == 0, result.output
    assert "submitted mlp as new-1" in result.stdout
    assert "corral logs -f new-1" in result.stdout


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("job.yaml", "metadata: {name: [x\n", "not valid YAML: "),
        ("job.json", '{"metadata": ', "not valid JSON: Expecting value (line 1, column 14)"),
        ("job.yaml", "- just\n- a list\n", "expected a mapping"),
    ],
)
def test_a_bad_job_file_is_one_error_line(
    invoke: Any, tmp_path: pathlib.Path, name: str, text: str, message: str
) -> None:
    job_file = tmp_path / name
    job_file.write_text(text)

    result = invoke("submit", str(job_file))

    assert result.exit_code == 1
    assert len(result.stderr.splitlines()) == 1
    assert result.stderr.startswith(f"error: {job_file}: ")
    assert message in result.stderr
    assert "Traceback" not in result.output


@pytest.mark.parametrize("command", [("submit",), ("pipeline", "submit"), ("il", "create", "-f")])
@pytest.mark.parametrize("name", ["deep.yaml", "deep.json"])
def test_a_file_nested_deeper_than_the_parsers_go_is_one_error_line(
    invoke: Any, tmp_path: pathlib.Path, command: tuple[str, ...], name: str
) -> None:
    deep = tmp_path / name
    deep.write_text("[" * 3000 + "]" * 3000)

    result = invoke(*command, str(deep))

    assert_one_error_line(result, f"{deep}: its lists or mappings nest too deep to be read")


def test_a_missing_job_file_is_one_error_line(invoke: Any, tmp_path: pathlib.Path) -> None:
    result = invoke("submit", str(tmp_path / "nope.yaml"))

    assert_one_error_line(result, f"{tmp_path / 'nope.yaml'}: no such file")


def test_an_unknown_key_is_refused_with_its_path_and_the_key_meant(
    fake: FakeCorral, invoke: Any, tmp_path: pathlib.Path
) -> None:
    job_file = tmp_path / "job.yaml"
    job_file.write_text(
        "metadata: {name: mlp}\nalgorithm: {command: 'true'}\n"
        "spec: {resource: {flavour_id: corral.cpu.full}}\n"
    )

    result = invoke("submit", str(job_file))

    assert_one_error_line(
        result, f"{job_file}: unknown key spec.resource.flavour_id (did you mean flavor_id?)"
    )
    assert fake.requests == []  # nothing was submitted


def test_unknown_keys_are_found_in_lists_and_named_all_at_once() -> None:
    body = {
        "kind": "job",
        "metadata": {"name": "x", "annotations": {"any-key": "1"}},
        "algorithm": {
            "command": "true",
            "environments": {"ANY_NAME": "1"},
            "outputs": [
                {"name": "a", "remote": {"obs": {"obs_url": "/a"}}},
                {"name": "b", "remote": {"obs": {"obs_urll": "/b"}}},
            ],
        },
        "spec": {"resource": {"flavor_id": "f"}, "volumes": [{"whatever": 1}]},
        "zzz": 1,
    }

    assert jobfile.unknown_keys(body) == [
        "algorithm.outputs[1].remote.obs.obs_urll (did you mean obs_url?)",
        "zzz (known there: algorithm, baseline_model, kind, metadata, model, spec)",
    ]


def test_unknown_keys_follow_the_models_aliases() -> None:
    class Inner(pydantic.BaseModel):
        model_config = pydantic.ConfigDict(populate_by_name=True)
        flavor: str = pydantic.Field("", alias="flavorId")

    class Outer(pydantic.BaseModel):
        inner: Inner | None = None

    assert jobfile.unknown_keys({"inner": {"flavorId": "a", "flavor": "b"}}, Outer) == []
    assert jobfile.unknown_keys({"inner": {"flavourId": "a"}}, Outer) == [
        "inner.flavourId (did you mean flavorId?)"
    ]


@pytest.mark.parametrize("job_file", sorted(p for p in EXAMPLES.glob("**/*.yaml")
                                             if "pipelines" not in p.parts), ids=str)
def test_the_examples_hold_only_known_keys_and_flavors_of_a_2_core_machine(
    job_file: pathlib.Path,
) -> None:
    if "IncrementalLearningJob" in job_file.read_text():  # a loop: its templates are jobs
        spec = il.load(job_file)["spec"]  # refuses unknown keys in its templates
        bodies = [spec[k]["template"] for k in ("trainSpec", "evalSpec", "deploySpec")]
    elif "job_config" in yaml.safe_load(job_file.read_text()):  # an algorithm: no flavor
        cli_algorithms.load_algorithm_file(job_file)  # refuses unknown keys
        return
    else:
        bodies = [jobfile.load_job_file(job_file)]  # refuses unknown keys
    for body in bodies:
        flavor = body["spec"]["resource"]["flavor_id"]
        assert flavor in two_core_flavors(), f"{job_file}: {flavor}"


def two_core_flavors() -> set[str]:
    node = resources.Node(name="local", cpu=2, memory_mb=8192)
    return {f.flavor_id for f in resources.default_flavors(node)}


# -- errors from the server -----------------------------------------------------------------


def test_an_error_answer_is_one_red_line(invoke: Any) -> None:
    result = invoke("show", "x")

    assert_one_error_line(result, "ModelArts.2775: training job 'x' does not exist")


def test_an_unreachable_server_is_one_red_line(tmp_path: pathlib.Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    obj = state.State(settings_mod.load(home=tmp_path))

    result = testing.CliRunner().invoke(main.cli, ["--url", url, "jobs"], obj=obj)

    assert_one_error_line(result, f"cannot reach corral at {url}: is `corral server` running?")


# -- looking at jobs ------------------------------------------------------------------------


def test_jobs_lists_whole_ids_and_passes_the_filters(fake: FakeCorral, invoke: Any) -> None:
    job_id = fake.add(make_job(status={"reason": "waiting for 1 CPU"}))

    result = invoke("jobs", "--phase", "running", "--phase", "Pending", "--name", "ml")

    assert result.exit_code == 0, result.output
    assert job_id in result.stdout
    assert "waiting for 1 CPU" in result.stdout
    assert "1 of 1 jobs" in result.stdout
    filters = fake.requests[-1][2]["filters"]
    assert {"key": "phase", "operator": "in", "value": ["Running", "Pending"]} in filters
    assert {"key": "name", "operator": "like", "value": ["ml"]} in filters


def test_show_gives_phase_tasks_and_runs(fake: FakeCorral, invoke: Any) -> None:
    status = {
        "phase": "Failed",
        "secondary_phase": "Failed",
        "reason": "worker-0 exited with 3",
        "failure_class": "user_exit",
        "task_statuses": [{"task": "worker-0", "exit_code": 3, "message": "boom"}],
        "running_records": [
            {
                "start_at": 1_700_000_001,
                "end_at": 1_700_000_009,
                "start_type": "init_or_rescheduled",
                "end_reason": "exit with 3",
                "end_related_task": "worker-0",
                "end_recover": None,
                "failure_class": "out_of_memory",
            }
        ],
    }
    job_id = fake.add(make_job(status=status))

    result = invoke("show", job_id)

    assert result.exit_code == 0, result.output
    assert re.search(r"^failure class +user_exit$", result.stdout, re.M)
    assert re.search(r"^1 .* exit with 3 +worker-0 +out_of_memory +-$", result.stdout, re.M)
    for text in (
        "worker-0 exited with 3",
        "boom",
        "exit with 3",
        "1m05s",
        "/code/train.py",
        "corral.cpu.1u",
    ):
        assert text in result.stdout


def test_show_names_the_image_a_job_runs_in(fake: FakeCorral, invoke: Any) -> None:
    image = "swr.example.com/team/train:1.0"
    job_id = fake.add(make_job(algorithm={"command": "train", "engine": {"image_url": image}}))

    result = invoke("show", job_id)

    assert result.exit_code == 0, result.output
    assert re.search(rf"^image +{re.escape(image)}$", result.stdout, re.M)


@pytest.mark.parametrize(
    ("phase", "secondary", "label"),
    [
        ("Completed", "Completed", "Completed"),
        ("Pending", "Queuing", "Pending"),
        ("Failed", "CreateFailed", "Failed (CreateFailed)"),
        ("Abnormal", "Lost", "Abnormal (Lost)"),
    ],
)
def test_the_secondary_phase_is_shown_only_when_it_says_more(
    fake: FakeCorral, invoke: Any, phase: str, secondary: str, label: str
) -> None:
    job_id = fake.add(make_job(status={"phase": phase, "secondary_phase": secondary}))

    shown, listed = invoke("show", job_id), invoke("jobs")

    assert shown.exit_code == 0, shown.output
    assert shown.stdout.splitlines()[1].split() == ["phase", *label.split()]
    assert f"   {label}   " in listed.stdout
    assert "/" not in shown.stdout.splitlines()[1]


def test_logs_prints_the_whole_log(fake: FakeCorral, invoke: Any) -> None:
    log = "".join(f"epoch {i}/30 loss=0.5\n" for i in range(30))
    job_id = fake.add(make_job(), log=log)

    result = invoke("logs", job_id)

    assert result.exit_code == 0, result.output
    assert result.stdout == log


def test_logs_follow_waits_for_the_end(fake: FakeCorral, invoke: Any, monkeypatch: Any) -> None:
    job_id = fake.add(make_job(), log="first\n", phases=("Pending", "Running", "Completed"))

    def grow_log(job_id: str, rest: list[str], req: httpx.Request) -> httpx.Response:
        # The job writes a line between every two polls, its last one just before it ends.
        answer = FakeCorral.job_route(fake, job_id, rest, req)
        if not rest:
            fake.logs[job_id] += f"seen {fake.jobs[job_id]['status']['phase']}\n"
        return answer

    monkeypatch.setattr(fake, "job_route", grow_log)

    result = invoke("logs", "-f", job_id)

    assert result.exit_code == 0, result.output
    assert result.stdout == "first\nseen Pending\nseen Running\nseen Completed\n"
    assert result.stderr == f"mlp ({job_id}) ended Completed\n"


@pytest.mark.parametrize("phase", ["Failed", "Terminated", "Abnormal"])
def test_logs_follow_fails_when_the_job_did_not_complete(
    fake: FakeCorral, invoke: Any, phase: str
) -> None:
    job = make_job(status={"reason": "worker-0: exit with 3"})
    job_id = fake.add(job, log="epoch 1\n", phases=("Running", phase))

    result = invoke("logs", "-f", job_id)

    assert result.exit_code == 1, result.output
    assert result.stdout == "epoch 1\n"  # the log alone: the verdict goes to stderr
    assert result.stderr == f"error: mlp ({job_id}) ended {phase}: worker-0: exit with 3\n"


def test_logs_without_follow_does_not_judge_the_job(fake: FakeCorral, invoke: Any) -> None:
    job_id = fake.add(make_job(status={"phase": "Failed"}), log="boom\n")

    result = invoke("logs", job_id)

    assert (result.exit_code, result.stdout, result.stderr) == (0, "boom\n", "")


@pytest.mark.parametrize("command", ["jobs", "flavors", "info", "events JOB", "show JOB"])
def test_every_listing_has_json(fake: FakeCorral, invoke: Any, command: str) -> None:
    job_id = fake.add(make_job())

    result = invoke(*command.replace("JOB", job_id).split(), "--json")

    assert result.exit_code == 0, result.output
    assert isinstance(json.loads(result.stdout), dict)


def test_info_names_the_server(invoke: Any) -> None:
    result = invoke("info")

    assert result.exit_code == 0, result.output
    for text in ("http://corral.test", "0.1.0", "p1", "sqlite", "local"):
        assert text in result.stdout


# -- the demo's pieces ----------------------------------------------------------------------


def test_final_metrics_come_from_the_last_final_line() -> None:
    log = "epoch 1/2 loss=0.9\nfinal: accuracy=0.5 loss=1\nfinal: accuracy=0.97 loss=0.08 x=y\n"

    assert demo.final_metrics(log) == {"accuracy": 0.97, "loss": 0.08, "x": "y"}
    assert demo.final_metrics("no summary\n") == {}


def test_resource_summary_keeps_last_and_peak() -> None:
    metrics = {
        "metrics": [
            {"metric": "cpuUsage", "value": [10.0, 95.5, 40.0]},
            {"metric": "gpuUtil", "value": []},
        ]
    }

    assert demo.resource_summary(metrics) == {"cpuUsage": {"last": 40.0, "peak": 95.5}}


def test_the_demo_job_writes_under_corral_home(tmp_path: pathlib.Path) -> None:
    example = EXAMPLES / "mlp" / "job.yaml"
    out = tmp_path / "demo" / "demo-1" / "output"

    body = demo._demo_body(jobfile.load_job_file(example), "demo-1", out, epochs=5)

    assert body["metadata"]["name"] == "demo-1"
    assert body["algorithm"]["outputs"][0]["remote"]["obs"]["obs_url"] == f"{out}/"
    assert {"name": "epochs", "value": "5"} in body["algorithm"]["parameters"]
    assert body["algorithm"]["boot_file"] == str(example.parent / "train.py")


def test_the_demo_summary_shows_memory_in_gib() -> None:
    out = rich.console.Console(record=True, width=200)
    summary = {"name": "demo-1", "job_id": "j1", "phase": "Completed",
               "secondary_phase": "Completed", "reason": None, "duration_ms": 5000,
               "resources": {"memUsedMB": {"last": 1577.0, "peak": 2048.0}},
               "training": {}, "model": "/m/model.npz", "output_dir": "/m"}

    demo._show_summary(out, summary)

    assert "memUsedMB  last 1.5 GiB, peak 2.0 GiB" in out.export_text()


def test_line_buffer_holds_partial_lines() -> None:
    lines = demo.LineBuffer()

    assert lines.feed("a\nb") == ["a"]
    assert lines.feed("c\r\nd") == ["bc"]
    assert lines.flush() == "d"


# -- naming a job ---------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["show", "logs", "events", "stop", "delete", "metrics"])
def test_a_job_is_found_by_its_name(fake: FakeCorral, invoke: Any, command: str) -> None:
    fake.add(make_job(metadata={"name": "mlp-demo-2"}))
    job_id = fake.add(make_job(metadata={"name": "mlp-demo"}))

    invoke(command, "mlp-demo")

    searched = [body for method, path, body in fake.requests if path.endswith("-searches")]
    assert searched == [{"offset": 0, "limit": 50, "sort_by": "create_time", "order": "desc",
                         "filters": [{"key": "name", "operator": "in", "value": ["mlp-demo"]}]}]
    assert any(f"/training-jobs/{job_id}" in path for _, path, _ in fake.requests)


def test_an_id_is_used_as_it_is(fake: FakeCorral, invoke: Any) -> None:
    job_id = fake.add(make_job())

    result = invoke("show", job_id)

    assert result.exit_code == 0, result.output
    assert [path for _, path, _ in fake.requests] == [f"/v2/p1/training-jobs/{job_id}"]


def test_a_name_of_several_jobs_is_refused_with_their_ids(
    fake: FakeCorral, invoke: Any
) -> None:
    family = str(uuid.uuid4())
    first = fake.add(make_job(metadata={"name": "mlp", "version": "V0001", "family_id": family}))
    second = fake.add(make_job(metadata={"name": "mlp", "version": "V0002", "family_id": family},
                               status={"phase": "Pending", "secondary_phase": "Queuing"}))

    result = invoke("show", "mlp")

    assert_one_error_line(
        result, f"2 jobs are named 'mlp': {first} (V0001, Running), "
                f"{second} (V0002, Pending); give the id of one")


def test_the_versions_of_a_job_are_found_by_their_name(fake: FakeCorral, invoke: Any) -> None:
    family = str(uuid.uuid4())
    newest = fake.add(make_job(metadata={"name": "mlp", "version": "V0002", "family_id": family}))
    fake.add(make_job(metadata={"name": "mlp", "version": "V0001", "family_id": family}))

    assert lookup.job_id(api_of(fake), "mlp", family=True) == newest


def test_a_name_that_no_job_has_is_reported_as_the_server_says(invoke: Any) -> None:
    result = invoke("show", "mlp-demo")

    assert_one_error_line(result, "ModelArts.2775: training job 'mlp-demo' does not exist")


def api_of(fake: FakeCorral) -> client.Client:
    return client.Client("http://corral.test", "p1", transport=httpx.MockTransport(fake))


# -- how things are shown -------------------------------------------------------------------


@pytest.mark.parametrize("command", ["flavors", "info", "pools", "quota", "show JOB"])
def test_memory_is_shown_in_gib_everywhere(fake: FakeCorral, invoke: Any, command: str) -> None:
    flavor = {"flavor_info": {"cpu": {"core_num": 1}, "memory": {"size": 2, "unit": "GB"}}}
    job_id = fake.add(make_job(spec={"resource": {"flavor_id": "corral.cpu.1u", "node_count": 1,
                                                  "flavor_detail": flavor}}))

    result = invoke(*command.replace("JOB", job_id).split())

    assert result.exit_code == 0, result.output
    amounts = re.findall(r"\b\d+(?:\.\d+)?\s*(?:[KMGT]i?B)\b", result.stdout)
    assert amounts and all(re.fullmatch(r"\d+\.\d GiB", a) for a in amounts), amounts
    assert "MEMORY_MB" not in result.stdout


def test_pools_names_each_node_as_node_name_takes_it(fake: FakeCorral, invoke: Any,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    local: dict[str, Any] = {"name": "local", "cpu": 2.0, "memory_gb": 23.54, "gpu": 0}
    gpu_node = {"name": "ray-3f2a9c1e7b02", "cpu": 8.0, "memory_gb": 64.0, "gpu": 2}
    monkeypatch.setitem(POOL, "nodes", [local, gpu_node])

    result = invoke("pools")

    assert result.exit_code == 0, result.output
    assert ("nodes: local (2 CPU, 23.5 GiB, 0 GPU), ray-3f2a9c1e7b02 (8 CPU, 64.0 GiB, 2 GPU)"
            in result.stdout)


def test_piped_tables_are_neither_folded_nor_padded(fake: FakeCorral, invoke: Any) -> None:
    long_reason = "waiting for resources: " + "x" * 300
    fake.add(make_job(status={"reason": long_reason}))
    fake.add(make_job(status={"reason": "short"}))

    result = invoke("jobs")

    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert [line for line in lines if line != line.rstrip()] == []
    assert any(line.endswith(long_reason) for line in lines)  # one line, not folded
    assert len(next(line for line in lines if line.endswith("short"))) < 150


def lookup_command(path: str) -> click.Command:
    command: click.Command = main.cli
    for name in path.split()[1:]:
        assert isinstance(command, click.Group)
        command = command.commands[name]
    return command


def command_paths(group: click.Group = main.cli, prefix: str = "corral") -> Iterator[str]:
    """`corral jobs`, `corral models list`, ...: every command and subcommand."""
    for name, command in sorted(group.commands.items()):
        yield f"{prefix} {name}"
        if isinstance(command, click.Group):
            yield from command_paths(command, f"{prefix} {name}")


@pytest.mark.parametrize("group", ["", *(p.removeprefix("corral ") for p in command_paths()
                                         if isinstance(lookup_command(p), click.Group))])
def test_help_describes_every_command_in_a_whole_phrase(group: str) -> None:
    result = testing.CliRunner().invoke(main.cli, [*group.split(), "--help"],
                                        env={"COLUMNS": "80"})

    assert result.exit_code == 0, result.output
    listed = result.stdout.split("Commands:\n", 1)[1].splitlines()
    assert listed and not [line for line in listed if line.rstrip().endswith("...")], listed


@pytest.mark.parametrize("args", [["show"], ["quota", "--pool", "p", "--accel", "npu"],
                                  ["login"], ["new-version", "J", "-p", "lr"], ["nope"]])
def test_a_usage_error_exits_with_2(invoke: Any, args: list[str]) -> None:
    result = invoke(*args)

    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output


def test_every_command_is_in_the_cli_reference() -> None:
    reference = (ROOT / "docs" / "cli.md").read_text()

    missing = [path for path in command_paths() if f"`{path}" not in reference]

    assert missing == []


def test_the_cli_reference_gives_the_exit_statuses() -> None:
    reference = (ROOT / "docs" / "cli.md").read_text()

    for status in ("| 0 |", "| 1 |", "| 2 |", "| 130 |"):
        assert status in reference


def test_memory_is_in_gib_and_a_small_amount_is_not_shown_as_nothing() -> None:
    assert [render.memory(g) for g in (0, 0.001, 0.02, 0.5, 11, None)] == [
        "0.0 GiB", "< 0.01 GiB", "0.02 GiB", "0.5 GiB", "11.0 GiB", "-"]
    assert render.memory_mb(20) == "0.02 GiB"  # a 20 MB process
