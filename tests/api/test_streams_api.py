"""The API the console's live views stand on, usable by any client: a task's log as a
stream and in windows, searched and downloaded; jobs' changes as a stream; long metric
series downsampled; the job search's added filters."""

from __future__ import annotations

import json
import pathlib
import shlex
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests import conftest, factories

pytestmark = pytest.mark.slow


def py(source: str) -> str:
    return f"{shlex.quote(sys.executable)} -c {shlex.quote(source)}"


def events(r: httpx.Response) -> Iterator[tuple[str, dict[str, Any]]]:
    """(event, data) of a Server-Sent Events answer, as they come."""
    name = "message"
    for line in r.iter_lines():
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: "):
            yield name, json.loads(line[6:])
            name = "message"


def logs(live: conftest.Live, job_id: str, rest: str) -> str:
    return live.path(f"/training-jobs/{job_id}/tasks/worker-0/logs/{rest}")


@pytest.fixture
def live(live_server: conftest.Live) -> conftest.Live:
    return live_server


# --- a log, followed ---------------------------------------------------------------------


def test_a_log_stream_gives_the_whole_log_as_it_grows_then_ends(live: conftest.Live) -> None:
    job_id = live.submit(factories.make_job(command=py(
        "import time\nfor i in range(30):\n    print('line', i, flush=True)\n"
        "    time.sleep(0.02)\n")))["metadata"]["id"]
    got, ends = [], []
    with live.http.stream("GET", logs(live, job_id, "stream"), params={"timeout": 60}) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        offset = 0
        for name, data in events(r):
            if name == "log":
                assert data["offset"] == offset  # each event follows on from the last
                offset = data["next_offset"]
                got.append(data["content"])
            else:
                ends.append((name, data))
    assert "".join(got) == "".join(f"line {i}\n" for i in range(30))
    assert ends == [("end", {"attempt": 1, "next_offset": offset, "phase": "Completed"})]


def test_a_log_stream_can_start_at_the_last_lines(live: conftest.Live) -> None:
    job_id = live.submit(factories.make_job(command="seq 1 1000"))["metadata"]["id"]
    live.wait(job_id, {"Completed"})
    with live.http.stream("GET", logs(live, job_id, "stream"), params={"tail": 20}) as r:
        got = [d["content"] for name, d in events(r) if name == "log"]
    assert "".join(got) == "996\n997\n998\n999\n1000\n"[-len("".join(got)):]
    assert "".join(got).startswith(tuple("0123456789")) and len("".join(got)) <= 20


def test_a_log_stream_of_new_lines_only_starts_with_a_whole_line(
        live: conftest.Live, tmp_path: pathlib.Path) -> None:
    """`tail=0` while the task is half way through writing a line: the stream starts at
    that line's start, not in its middle (a client that splits the content into lines
    got a piece of one first)."""
    go = tmp_path / "go"
    job_id = live.submit(factories.make_job(command=py(
        "import os, sys, time\n"
        "sys.stdout.write('first\\npar'); sys.stdout.flush()\n"
        f"while not os.path.exists({str(go)!r}):\n    time.sleep(0.02)\n"
        "print('tial'); print('next')\n")))["metadata"]["id"]
    deadline = time.monotonic() + 60
    while not live.http.get(logs(live, job_id, "window")).json()["content"].endswith("par"):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    got = []
    with live.http.stream("GET", logs(live, job_id, "stream"),
                          params={"tail": 0, "timeout": 15}) as r:
        for name, data in events(r):
            if name == "log":
                got.append(data["content"])
                go.touch()
            else:
                break
    assert "".join(got) == "partial\nnext\n"


def test_a_log_stream_of_an_unknown_task_is_404(live: conftest.Live) -> None:
    job_id = live.submit(factories.make_job(command="true"))["metadata"]["id"]
    r = live.http.get(live.path(f"/training-jobs/{job_id}/tasks/worker-9/logs/stream"))
    assert r.status_code == 404 and r.json()["error_code"] == "ModelArts.2775"


# --- a log, in pieces --------------------------------------------------------------------


def test_windows_search_and_download_of_a_log(live: conftest.Live) -> None:
    job_id = live.submit(factories.make_job(command="seq 1 5000"))["metadata"]["id"]
    live.wait(job_id, {"Completed"})
    whole = "".join(f"{i}\n" for i in range(1, 5001))
    last = live.http.get(logs(live, job_id, "window"), params={"max_bytes": 30}).json()
    assert last["content"] == whole[last["offset"]:] and last["next_offset"] == len(whole)
    assert last["finished"] is True and last["full_size"] == len(whole)
    before = live.http.get(logs(live, job_id, "window"),
                           params={"end": last["offset"], "max_bytes": 30}).json()
    assert before["next_offset"] == last["offset"]
    assert before["content"] == whole[before["offset"]:last["offset"]]
    first = live.http.get(logs(live, job_id, "window"), params={"start": 0, "max_bytes": 12})
    assert first.json()["content"] == "1\n2\n3\n4\n5\n6\n"
    both = live.http.get(logs(live, job_id, "window"), params={"start": 0, "end": 9})
    assert both.status_code == 400 and both.json()["error_code"] == "ModelArts.2788"

    found = live.http.get(logs(live, job_id, "search"), params={"q": "4999"}).json()
    assert [m["line"] for m in found["matches"]] == ["4999"]
    assert whole[found["matches"][0]["offset"]:].startswith("4999\n") and found["done"]

    r = live.http.get(logs(live, job_id, "download"))
    assert r.status_code == 200 and r.text == whole
    assert "attachment" in r.headers["content-disposition"]


def test_an_attempt_that_never_was_has_no_log(live: conftest.Live) -> None:
    job_id = live.submit(factories.make_job(command="true"))["metadata"]["id"]
    live.wait(job_id, {"Completed"})
    for rest in ("window", "download", "stream"):
        r = live.http.get(logs(live, job_id, rest), params={"attempt": 7})
        assert r.status_code == 404 and "attempt 7" in r.json()["error_msg"]


# --- jobs' changes -----------------------------------------------------------------------


def test_the_job_changes_stream_says_when_a_job_changes(live: conftest.Live) -> None:
    job_id = live.submit(factories.make_job(command="sleep 60"))["metadata"]["id"]
    live.wait(job_id, {"Running"})
    seen: list[dict[str, Any]] = []
    with live.http.stream("GET", live.path("/training-job-changes"),
                          params={"job_id": [job_id, "no-such-job"], "timeout": 30}) as r:
        assert r.status_code == 200
        for name, data in events(r):
            assert name == "job"
            seen.append(data)
            if data.get("phase") == "Running":
                threading.Thread(target=lambda: live.http.post(
                    live.path(f"/training-jobs/{job_id}/actions"),
                    json={"action_type": "terminate"})).start()
            if data.get("phase") == "Terminated":
                break
    assert {"job_id": "no-such-job", "deleted": True} in seen
    phases = [d["phase"] for d in seen if d["job_id"] == job_id]
    assert phases[0] == "Running" and "Terminating" in phases and phases[-1] == "Terminated"


def test_a_stream_ends_after_its_timeout(live: conftest.Live) -> None:
    job_id = live.submit(factories.make_job(command="sleep 60"))["metadata"]["id"]
    with live.http.stream("GET", live.path("/training-job-changes"),
                          params={"job_id": job_id, "timeout": 0.5}) as r:
        got = list(events(r))
    assert got and all(d["job_id"] == job_id for _, d in got)
    r = live.http.get(live.path("/training-job-changes"), params={"job_id": job_id,
                                                                   "timeout": 4000})
    assert r.status_code == 400


# --- downsampled metrics, the search's filters ---------------------------------------------


def test_long_metric_series_are_downsampled_on_request(live: conftest.Live) -> None:
    job_id = live.submit(factories.make_job(command=py(
        "for i in range(600):\n"
        "    print(f'corral:metrics step={i} loss={1000 if i == 333 else 1.0 / (i + 1)}')\n")
    ))["metadata"]["id"]
    live.wait(job_id, {"Completed"})

    def loss(**params: Any) -> dict[str, Any]:
        r = live.http.get(live.path(f"/training-jobs/{job_id}/training-metrics"), params=params)
        assert r.status_code == 200, r.text
        return next((s for s in r.json()["metrics"] if s["metric"] == "loss"), {"value": []})

    whole = factories.wait_for(lambda: (s := loss()) and len(s["value"]) == 600 and s, 30,
                               "every metric point collected")
    cut = loss(points=40)
    assert len(cut["value"]) <= 40 and len(cut["steps"]) == len(cut["value"])
    assert cut["steps"][0] == 0 and cut["steps"][-1] == 599 and 333 in cut["steps"]
    assert cut["value"] == [whole["value"][s] for s in cut["steps"]]
    r = live.http.get(live.path(f"/training-jobs/{job_id}/metrics/worker-0"),
                      params={"points": 10})
    assert r.status_code == 200 and len(r.json()["times"]) <= 10
    assert live.http.get(live.path(f"/training-jobs/{job_id}/training-metrics"),
                         params={"points": 1}).status_code == 400


def test_jobs_are_found_by_user_pool_and_what_made_them(live: conftest.Live) -> None:
    mine = live.submit(factories.make_job(name="by-admin", command="true"))
    other = live.new_user("bob")
    r = other.http.post(live.path("/training-jobs"),
                        json=factories.make_job(name="by-bob", command="true"))
    assert r.status_code == 201, r.text

    def names(*filters: dict[str, Any]) -> set[str]:
        r = live.http.post(live.path("/training-job-searches"),
                           json={"limit": 50, "filters": list(filters)})
        assert r.status_code == 200, r.text
        return {j["metadata"]["name"] for j in r.json()["items"]}

    assert names({"key": "user_name", "value": ["bob"]}) == {"by-bob"}
    assert names({"key": "pool_id", "value": ["default"]}) == {"by-admin", "by-bob"}
    assert names({"key": "pool_id", "value": ["elsewhere"]}) == set()
    assert names({"key": "owner_kind", "value": [""]}) == {"by-admin", "by-bob"}
    assert names({"key": "owner_kind", "value": ["pipeline"]}) == set()
    assert names({"key": "kind", "value": ["job"]}) == {"by-admin", "by-bob"}
    assert "owner" not in mine["metadata"]  # a job nothing made says so by leaving it out
