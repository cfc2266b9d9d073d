"""The CLI against a fake server answered in-process: output, errors and job-file handling.

The same commands against a real server are in tests/api/test_cli.py.
"""

from __future__ import annotations

import json
import pathlib
import socket
import uuid
from typing import Any

import httpx
import pytest
from click import testing

from corral import cli, client, demo, jobfile
from corral import settings as settings_mod


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
        body = json.loads(req.content) if req.content else None
        self.requests.append((req.method, req.url.path, body))
        parts = req.url.path.removeprefix("/v2/p1/").split("/")
        if req.url.path == "/corral/info":
            return ok(
                {
                    "version": "0.1.0",
                    "default_project_id": "p1",
                    "database": "sqlite",
                    "home": "/h",
                    "nodes": [{"name": "local", "cpus": 4}],
                }
            )
        if parts == ["training-jobs"] and req.method == "POST":
            job = make_job(metadata={**body["metadata"], "id": "new-1"})
            return ok(job, 201)
        if parts == ["training-job-searches"]:
            items = list(self.jobs.values())
            return ok({"total": len(items), "count": len(items), "items": items})
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
        if parts[0] == "training-jobs" and parts[1] in self.jobs:
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


@pytest.fixture
def fake() -> FakeCorral:
    return FakeCorral()


@pytest.fixture
def invoke(fake: FakeCorral, tmp_path: pathlib.Path) -> Any:
    def run(*args: str) -> testing.Result:
        api = client.Client("http://corral.test", "p1", transport=httpx.MockTransport(fake))
        state = cli.State(settings_mod.load(home=tmp_path), api=api)
        return testing.CliRunner().invoke(cli.cli, list(args), obj=state)

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


def test_a_missing_job_file_is_one_error_line(invoke: Any, tmp_path: pathlib.Path) -> None:
    result = invoke("submit", str(tmp_path / "nope.yaml"))

    assert_one_error_line(result, f"{tmp_path / 'nope.yaml'}: no such file")


# -- errors from the server -----------------------------------------------------------------


def test_an_error_answer_is_one_red_line(invoke: Any) -> None:
    result = invoke("show", "x")

    assert_one_error_line(result, "ModelArts.2775: training job 'x' does not exist")


def test_an_unreachable_server_is_one_red_line(tmp_path: pathlib.Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    state = cli.State(settings_mod.load(home=tmp_path))

    result = testing.CliRunner().invoke(cli.cli, ["--url", url, "jobs"], obj=state)

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
        "task_statuses": [{"task": "worker-0", "exit_code": 3, "message": "boom"}],
        "running_records": [
            {
                "start_at": 1_700_000_001,
                "end_at": 1_700_000_009,
                "start_type": "init_or_rescheduled",
                "end_reason": "exit with 3",
                "end_related_task": "worker-0",
                "end_recover": None,
            }
        ],
    }
    job_id = fake.add(make_job(status=status))

    result = invoke("show", job_id)

    assert result.exit_code == 0, result.output
    for text in (
        "Failed / Failed",
        "worker-0 exited with 3",
        "boom",
        "exit with 3",
        "1m05s",
        "/code/train.py",
        "corral.cpu.1u",
    ):
        assert text in result.stdout


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
    example = pathlib.Path(demo.__file__).parents[2] / "examples" / "mlp" / "job.yaml"
    out = tmp_path / "demo" / "demo-1" / "output"

    body = demo._demo_body(jobfile.load_job_file(example), "demo-1", out, epochs=5)

    assert body["metadata"]["name"] == "demo-1"
    assert body["algorithm"]["outputs"][0]["remote"]["obs"]["obs_url"] == f"{out}/"
    assert {"name": "epochs", "value": "5"} in body["algorithm"]["parameters"]
    assert body["algorithm"]["boot_file"] == str(example.parent / "train.py")


def test_line_buffer_holds_partial_lines() -> None:
    lines = demo.LineBuffer()

    assert lines.feed("a\nb") == ["a"]
    assert lines.feed("c\r\nd") == ["bc"]
    assert lines.flush() == "d"
