"""`corral algorithms ...` and `corral submit --algorithm` against a live server: a file
with a relative code folder saved, listed, shown, a job made of it that completes,
updated, deleted; a misspelt key and an unknown algorithm refused in one line."""

from __future__ import annotations

import json
import pathlib
import textwrap
from collections.abc import Iterator

import pytest

from tests import conftest
from tests.api.test_cli import corral

TRAIN = """\
import pathlib, sys
args = dict(a[2:].split("=", 1) for a in sys.argv[1:])
pathlib.Path(args["train_url"], "args.txt").write_text(" ".join(sys.argv[1:]))
"""
ALGORITHM = """\
metadata: {name: %(name)s, description: writes its arguments}
job_config:
  code_dir: code
  boot_file: train.py
  parameters:
    - name: lr
      value: "%(lr)s"
      description: learning rate
      constraint: {type: Float, valid_type: Range, valid_range: ["0", "1"]}
    - {name: epochs, value: "2", constraint: {type: Integer, required: true}}
  outputs:
    - {name: train_url, description: where it writes}
"""
JOB = """\
metadata: {name: %(name)s}
algorithm:
  parameters: [{name: lr, value: "0.3"}]
  outputs: [{name: train_url, remote: {obs: {obs_url: ./out}}}]
"""


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[conftest.Live]:
    server = conftest.start_live(tmp_path_factory.mktemp("algorithms-cli") / "home")
    yield server
    conftest.stop_live(server)


def folder(tmp_path: pathlib.Path, name: str, lr: str = "0.05") -> pathlib.Path:
    (tmp_path / "code").mkdir(exist_ok=True)
    (tmp_path / "code" / "train.py").write_text(TRAIN)
    (tmp_path / "out").mkdir(exist_ok=True)
    (tmp_path / "algorithm.yaml").write_text(ALGORITHM % {"name": name, "lr": lr})
    (tmp_path / "job.yaml").write_text(JOB % {"name": f"{name}-job"})
    return tmp_path


def test_save_list_show_submit_update_and_delete(live: conftest.Live,
                                                 tmp_path: pathlib.Path) -> None:
    here = folder(tmp_path, "cli-algo")
    made = corral(live, "algorithms", "create", str(here / "algorithm.yaml"))
    assert made.exit_code == 0, made.output
    assert "algorithm cli-algo saved as" in made.stdout

    shown = json.loads(corral(live, "algorithms", "show", "cli-algo", "--json").stdout)
    assert shown["job_config"]["code_dir"] == str(here / "code")  # made absolute
    listed = corral(live, "algorithms", "list", "--name", "cli-")
    assert listed.exit_code == 0 and "cli-algo" in listed.stdout and "lr, epochs" in listed.stdout
    text = corral(live, "algorithms", "show", "cli-algo").stdout
    assert "--lr" in text and "Float in [0, 1]" in text and "learning rate" in text
    squeezed = "".join(text.split())  # whatever the terminal's width wrapped
    assert squeezed.count(str(here / "code")) == 1
    assert f"code{here / 'code' / 'train.py'}" in squeezed

    submitted = corral(live, "submit", str(here / "job.yaml"), "--algorithm", "cli-algo",
                       "--json")
    assert submitted.exit_code == 0, submitted.output
    job = json.loads(submitted.stdout)
    assert (job["algorithm"]["id"], job["algorithm"]["name"]) == (shown["metadata"]["id"],
                                                                  "cli-algo")
    assert live.wait(job["metadata"]["id"])["status"]["phase"] == "Completed"
    assert (here / "out" / "args.txt").read_text().split()[:2] == ["--lr=0.3", "--epochs=2"]

    (here / "algorithm.yaml").write_text(ALGORITHM % {"name": "cli-algo-2", "lr": "0.5"})
    updated = corral(live, "algorithms", "update", shown["metadata"]["id"],
                     str(here / "algorithm.yaml"))
    assert updated.exit_code == 0, updated.output
    again = json.loads(corral(live, "algorithms", "show", "cli-algo-2", "--json").stdout)
    assert again["job_config"]["parameters"][0]["value"] == "0.5"

    deleted = corral(live, "algorithms", "delete", "cli-algo-2")
    assert deleted.exit_code == 0, deleted.output
    assert "cli-algo-2" not in corral(live, "algorithms", "list").stdout
    assert live.job(job["metadata"]["id"])["algorithm"]["name"] == "cli-algo"  # kept


def test_bad_input_is_one_line_and_changes_nothing(live: conftest.Live,
                                                   tmp_path: pathlib.Path) -> None:
    here = folder(tmp_path, "cli-bad")
    (here / "typo.yaml").write_text(textwrap.dedent("""\
        metadata: {name: typo}
        job_config: {command: "true", boot_flie: x.py}
        """))
    typo = corral(live, "algorithms", "create", str(here / "typo.yaml"))
    assert typo.exit_code == 1
    assert "job_config.boot_flie (did you mean boot_file?)" in typo.stderr

    unknown = corral(live, "submit", str(here / "job.yaml"), "--algorithm", "no-such")
    assert unknown.exit_code == 1
    assert unknown.stderr.strip().splitlines() == [
        "error: ModelArts.2775: no algorithm named or with id 'no-such'"]

    assert corral(live, "algorithms", "create", str(here / "algorithm.yaml")).exit_code == 0
    (here / "job.yaml").write_text((JOB % {"name": "cli-bad-job"}).replace('"0.3"', '"7"'))
    outside = corral(live, "submit", str(here / "job.yaml"), "--algorithm", "cli-bad")
    assert outside.exit_code == 1
    assert "parameter 'lr' of algorithm 'cli-bad': 7 is outside [0, 1]" in outside.stderr
    twice = corral(live, "algorithms", "create", str(here / "algorithm.yaml"))
    assert twice.exit_code == 1 and "ModelArts.2751" in twice.stderr
    assert "cli-bad-job" not in corral(live, "jobs").stdout
