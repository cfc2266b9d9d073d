"""`corral search` against a real server: show (and --watch), trials, stop-trial,
algorithms, --json, and one-line errors."""

from __future__ import annotations

import json
import pathlib
import re
from typing import Any

import pytest

from tests import factories as f
from tests.api.test_cli import assert_one_error_line, corral
from tests.integration import search_rig as rig

pytestmark = pytest.mark.slow


def _submit(live: Any, tmp_path: pathlib.Path, name: str, **params: Any) -> str:
    body = rig.body(rig.code(tmp_path), rig.policy(samples=3, parallel=2), **params)
    body["metadata"]["name"] = name
    return str(live.submit(body)["metadata"]["id"])


def test_show_watch_follows_a_search_to_its_best_trial(live_server: Any,
                                                       tmp_path: pathlib.Path) -> None:
    _submit(live_server, tmp_path, "cli-search")

    watched = corral(live_server, "search", "show", "cli-search", "--watch")
    assert watched.exit_code == 0, watched.output
    # Each trial is followed to its end (the watch may begin after the first has ended).
    for trial in range(3):
        assert re.search(rf"trial {trial} +completed", watched.output), watched.output
    assert "best so far: trial" in watched.output
    assert "cli-search Completed  random_search, 3 trial(s)  best: trial" in watched.output

    shown = corral(live_server, "search", "show", "cli-search", "--json")
    data = json.loads(shown.stdout)
    assert data["trials"]["total"] == 3
    assert [row[0] for row in data["importance"]["data"]] != []
    table = corral(live_server, "search", "trials", "cli-search")
    assert table.exit_code == 0 and table.output.count("completed") == 3


def test_stop_trial_stops_it_and_errors_are_one_line(live_server: Any,
                                                     tmp_path: pathlib.Path) -> None:
    job_id = _submit(live_server, tmp_path, "cli-stop", steps=100_000)
    f.wait_for(lambda: len(rig.trials(live_server, job_id)) == 2, 60, "two trials")

    stopped = corral(live_server, "search", "stop-trial", "cli-stop", "1")
    assert stopped.exit_code == 0 and "trial 1 stopping" in stopped.output
    f.wait_for(lambda: rig.trials(live_server, job_id)[1].state == "early_stopped", 30)
    assert_one_error_line(corral(live_server, "search", "stop-trial", "cli-stop", "1"),
                          "ModelArts.2796: trial 1 is early_stopped")
    assert_one_error_line(corral(live_server, "search", "stop-trial", "cli-stop", "x"),
                          "ModelArts.2775: trial 'x' does not exist")
    plain = live_server.submit(f.make_job(name="cli-plain", command="echo hi"))
    assert plain
    refused = corral(live_server, "search", "show", "cli-plain")
    assert_one_error_line(refused, "ModelArts.2775: training job")
    assert refused.stderr.rstrip().endswith("is not a hyperparameter search")
    live_server.http.post(live_server.path(f"/training-jobs/{job_id}/actions"),
                          json={"action_type": "terminate"})
    live_server.wait(job_id)


def test_algorithms_lists_them_with_their_defaults(live_server: Any) -> None:
    shown = corral(live_server, "search", "algorithms")
    assert shown.exit_code == 0
    assert "asha_search" in shown.output and "num_samples=10" in shown.output
