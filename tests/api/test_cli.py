"""The `corral` command against a real server (the `live_server` fixture of tests/conftest.py).

Each test runs the example MLP or a variant of it through the CLI the way a user would, and
checks what they would see: the output, the exit status, the files the job wrote.
"""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
from typing import Any

import psutil
import pytest
import yaml
from click import testing

from corral import settings as settings_mod
from corral.cli import main, state
from tests import conftest, factories

pytestmark = pytest.mark.slow

EXAMPLE = pathlib.Path(__file__).parents[2] / "examples" / "mlp"


def corral(url: Any, *args: str, home: pathlib.Path | None = None) -> testing.Result:
    """Runs `corral [--url URL] ARGS...` in-process, with its own CORRAL_HOME when given.

    Given a live server instead of a URL, the CLI uses its URL and its home, where the
    server wrote the admin's credential on its first start.
    """
    if isinstance(url, conftest.Live):
        url, home = url.url, home or url.settings.home
    settings = settings_mod.Settings(**({"home": home} if home else {}))
    argv = (["--url", url] if url else []) + list(args)
    return testing.CliRunner().invoke(main.cli, argv, obj=state.State(settings))


def write_job(folder: pathlib.Path, name: str, epochs: int = 20, **resource: Any) -> pathlib.Path:
    """A job file like examples/mlp/job.yaml, writing to `folder`/output (a relative path)."""
    body = yaml.safe_load((EXAMPLE / "job.yaml").read_text())
    body["metadata"]["name"] = name
    body["algorithm"]["code_dir"] = str(EXAMPLE)
    body["algorithm"]["parameters"] = [{"name": "epochs", "value": str(epochs)}]
    body["spec"]["resource"].update(resource)
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(body))
    return path


def submit(url: Any, job_file: pathlib.Path) -> str:
    result = corral(url, "submit", str(job_file), "--json")
    assert result.exit_code == 0, result.output
    return str(json.loads(result.stdout)["metadata"]["id"])


def assert_one_error_line(result: testing.Result, starts: str) -> None:
    assert result.exit_code == 1, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {starts}"), result.stderr
    assert "Traceback" not in result.output


def test_info_names_the_server_and_its_project(live_server: Any) -> None:
    as_json = corral(live_server, "info", "--json")
    text = corral(live_server, "info")

    assert as_json.exit_code == 0, as_json.output
    found = json.loads(as_json.stdout)
    assert found["url"] == live_server.url
    assert found["default_project_id"] == live_server.project_id
    assert found["nodes"]
    assert live_server.project_id in text.stdout
    assert found["leader"]["url"] == live_server.url
    assert f"at {live_server.url} (epoch" in text.stdout


def test_flavors_and_engines_show_what_jobs_can_ask_for(live_server: Any) -> None:
    flavors = json.loads(corral(live_server, "flavors", "--json").stdout)
    engines = json.loads(corral(live_server, "engines", "--json").stdout)

    assert "corral.cpu.1u" in [f["flavor_id"] for f in flavors["flavors"]]
    assert engines["items"]
    assert "corral.cpu.1u" in corral(live_server, "flavors").stdout
    assert engines["items"][0]["engine_id"] in corral(live_server, "engines").stdout


def test_a_submitted_example_trains_and_can_be_followed(
    live_server: Any, tmp_path: pathlib.Path
) -> None:
    job_id = submit(live_server, write_job(tmp_path, "mlp-cli"))

    followed = corral(live_server, "logs", "-f", job_id)

    assert followed.exit_code == 0, followed.output
    assert followed.stderr == f"mlp-cli ({job_id}) ended Completed\n"
    assert "epoch 20/20 loss=" in followed.stdout
    assert "final: accuracy=" in followed.stdout
    assert (tmp_path / "output" / "model.npz").is_file()  # ./output next to the job file
    assert corral(live_server, "logs", job_id).stdout == followed.stdout
    shown = corral(live_server, "show", job_id)
    assert "Completed" in shown.stdout and "worker-0" in shown.stdout
    listed = corral(live_server, "jobs", "--name", "mlp-cli", "--phase", "completed")
    assert job_id in listed.stdout
    events = json.loads(corral(live_server, "events", job_id, "--json").stdout)
    assert events["total"] >= 1


def test_a_failing_job_shows_its_exit_code(live_server: Any, tmp_path: pathlib.Path) -> None:
    job_file = write_job(tmp_path, "mlp-bad")
    body = yaml.safe_load(job_file.read_text())
    body["algorithm"]["parameters"] = [{"name": "epochs", "value": "many"}]  # argparse: exit 2
    # No restarts (the example allows two, 5 and 10 s apart): the first exit is the end.
    body["metadata"]["annotations"]["fault-tolerance/job-retry-num"] = "0"
    job_file.write_text(yaml.safe_dump(body))
    job_id = submit(live_server, job_file)

    followed = corral(live_server, "logs", "-f", "mlp-bad")
    shown = corral(live_server, "show", job_id, "--json")

    # `corral logs -f mlp-bad && deploy` must not deploy.
    assert followed.exit_code == 1, followed.output
    assert followed.stderr.startswith(f"error: mlp-bad ({job_id}) ended Failed")
    assert "usage: train.py" in followed.stdout  # argparse's complaint: the log itself
    status = json.loads(shown.stdout)["status"]
    assert status["phase"] == "Failed"
    assert [t["exit_code"] for t in status["task_statuses"]] == [2]


def test_a_job_is_named_by_its_name_unless_its_versions_share_it(
    live_server: Any, tmp_path: pathlib.Path
) -> None:
    first = submit(live_server, write_job(tmp_path, "mlp-named", epochs=2))
    live_server.wait(first)
    assert corral(live_server, "show", "mlp-named").exit_code == 0
    made = corral(live_server, "new-version", "mlp-named", "-p", "epochs=1", "--json")
    second = json.loads(made.stdout)["metadata"]["id"]
    live_server.wait(second)

    ambiguous = corral(live_server, "show", "mlp-named")
    family = corral(live_server, "versions", "mlp-named")

    assert_one_error_line(ambiguous, "2 jobs are named 'mlp-named': ")
    assert first in ambiguous.stderr and second in ambiguous.stderr
    assert family.exit_code == 0, family.output
    assert first in family.stdout and second in family.stdout
    assert corral(live_server, "show", second).exit_code == 0  # an id is always one job


def test_a_waiting_job_is_described_in_the_same_words_everywhere(live_server: Any) -> None:
    live = live_server
    blocker = live.submit(factories.make_job(command="sleep 30", flavor_id="corral.cpu.full"))
    live.wait(blocker["metadata"]["id"], {"Running"})
    live.submit(factories.make_job(name="head", command="true", flavor_id="corral.cpu.full"))
    behind = live.submit(factories.make_job(name="behind", command="true",
                                            flavor_id="corral.cpu.full"))["metadata"]["id"]
    factories.wait_for(lambda: live.job(behind)["status"]["reason"] == "queued: 1 job(s) ahead",
                       what="the job to queue behind the head")

    listed = corral(live, "jobs", "--name", "behind").stdout
    queued = corral(live, "queue").stdout
    shown = corral(live, "show", "behind").stdout

    [row] = [line for line in listed.splitlines() if line.startswith(behind)]
    [place] = [line for line in queued.splitlines() if behind in line]
    [reason] = [line for line in shown.splitlines() if line.startswith("reason")]
    for line in (row, place, reason):
        assert line.endswith("   queued: 1 job(s) ahead"), line


def test_a_running_job_can_be_stopped_then_deleted(
    live_server: Any, tmp_path: pathlib.Path
) -> None:
    job_id = submit(live_server, write_job(tmp_path, "mlp-long", epochs=1_000_000))
    live_server.wait(job_id, {"Running"})

    stopped = corral(live_server, "stop", job_id)

    assert stopped.exit_code == 0, stopped.output
    assert live_server.wait(job_id)["status"]["phase"] == "Terminated"
    assert corral(live_server, "delete", job_id).exit_code == 0
    assert_one_error_line(corral(live_server, "show", job_id), "ModelArts.2775: ")


@pytest.mark.parametrize("command", ["show", "logs", "events", "stop", "delete"])
def test_an_unknown_job_is_one_error_line(live_server: Any, command: str) -> None:
    assert_one_error_line(corral(live_server, command, "no-such-job"), "ModelArts.2775: ")


def test_a_refused_job_is_one_error_line(live_server: Any, tmp_path: pathlib.Path) -> None:
    result = corral(live_server, "submit", str(write_job(tmp_path, "x", flavor_id="nope")))

    assert_one_error_line(result, "ModelArts.2763: ")


def test_the_demo_runs_on_its_own_server(tmp_path: pathlib.Path) -> None:
    result = corral(None, "demo", "--epochs", "30", "--json", home=tmp_path / "home")

    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["phase"] == "Completed"
    assert summary["training"]["accuracy"] > 0.9
    assert summary["model"] == f"{tmp_path}/home/demo/{summary['name']}/output/model.npz"
    assert pathlib.Path(summary["model"]).is_file()
    # The completed job's model was registered, with the metrics it reported.
    assert summary["registered"]["name"] == summary["name"]
    assert summary["registered"]["version"] == 1
    assert (pathlib.Path(summary["registered"]["location"]) / "model.npz").is_file()
    assert summary["reported"]["val_accuracy"] == pytest.approx(
        summary["training"]["val_accuracy"], abs=1e-4)


def test_sigterm_stops_the_demo_its_job_and_its_server(tmp_path: pathlib.Path) -> None:
    home = tmp_path / "home"
    demo = subprocess.Popen(
        [sys.executable, "-c", "from corral.cli.main import main; main()", "demo",
         "--epochs", "1000000"], env={**os.environ, "CORRAL_HOME": str(home)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert demo.stdout is not None
        for line in demo.stdout:
            if "submitted" in line:
                break
        factories.wait_for(lambda: _under(home / "runs"), 30, "the demo job to run")

        demo.send_signal(signal.SIGTERM)
        _, err = demo.communicate(timeout=60)
        assert demo.returncode == 1, err
        assert "interrupted: stopped the demo job" in err
        factories.wait_for(lambda: not _under(home / "runs"), 30, "the job's processes to end")
    finally:
        demo.kill()
        conftest.kill_under(home)


def _under(runs: pathlib.Path) -> list[int]:
    """Processes running in `runs` (a job's)."""
    found = []
    for proc in psutil.process_iter(["cwd"]):
        if (proc.info["cwd"] or "").startswith(str(runs)):
            found.append(proc.pid)
    return found


def test_the_demo_uses_the_server_already_running_for_its_home(live_server: Any) -> None:
    result = corral(None, "demo", "--epochs", "5", "--json", home=live_server.settings.home)

    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["server"] == live_server.url
