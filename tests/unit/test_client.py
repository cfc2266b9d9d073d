"""The HTTP client against requests answered in-process (httpx.MockTransport)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from corral.sdk import client

Handler = Callable[[httpx.Request], httpx.Response]


def make_client(handler: Handler, project_id: str | None = "p1") -> client.Client:
    return client.Client("http://corral.test", project_id, transport=httpx.MockTransport(handler))


def error(status: int, code: str, msg: str) -> httpx.Response:
    return httpx.Response(status, json={"error_code": code, "error_msg": msg})


def test_error_answers_raise_client_error_with_the_modelarts_code() -> None:
    api = make_client(lambda req: error(404, "ModelArts.2775", "training job 'x' does not exist"))

    with pytest.raises(client.ClientError) as caught:
        api.get_job("x")

    assert caught.value.status == 404
    assert caught.value.error_code == "ModelArts.2775"
    assert str(caught.value) == "ModelArts.2775: training job 'x' does not exist"


def test_an_error_without_a_modelarts_body_still_says_what_happened() -> None:
    api = make_client(lambda req: httpx.Response(502, text="<html>Bad Gateway</html>"))

    with pytest.raises(client.ClientError) as caught:
        api.get_job("x")

    assert caught.value.status == 502
    assert caught.value.error_code is None
    assert "HTTP 502" in str(caught.value)


def test_an_unreachable_server_says_to_start_one() -> None:
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    api = client.Client(f"http://127.0.0.1:{port}", timeout=5)

    with pytest.raises(client.ClientError) as caught:
        api.info()

    assert caught.value.status == 0
    assert str(caught.value) == (
        f"cannot reach corral at http://127.0.0.1:{port}: is `corral server` running?"
    )


def test_the_project_is_asked_once_from_the_server() -> None:
    paths: list[str] = []

    def handler(req: httpx.Request) -> httpx.Response:
        paths.append(req.url.path)
        if req.url.path == "/corral/info":
            return httpx.Response(200, json={"default_project_id": "proj-7", "version": "x"})
        return httpx.Response(200, json={"total": 0, "items": []})

    api = make_client(handler, project_id=None)
    api.engines()
    api.flavors()

    assert paths == [
        "/corral/info",
        "/v2/proj-7/training-job-engines",
        "/v2/proj-7/training-job-flavors",
    ]


def test_list_jobs_turns_shorthands_into_search_filters() -> None:
    seen: dict[str, Any] = {}

    def handler(req: httpx.Request) -> httpx.Response:
        seen["path"], seen["body"] = req.url.path, json.loads(req.content)
        return httpx.Response(200, json={"total": 0, "items": []})

    make_client(handler).list_jobs(phases=["Running", "Pending"], name="mlp", limit=5, offset=2)

    assert seen["path"] == "/v2/p1/training-job-searches"
    assert seen["body"] == {
        "offset": 2,
        "limit": 5,
        "sort_by": "create_time",
        "order": "desc",
        "filters": [
            {"key": "phase", "operator": "in", "value": ["Running", "Pending"]},
            {"key": "name", "operator": "like", "value": ["mlp"]},
        ],
    }


def test_empty_answers_are_fine() -> None:
    def handler(req: httpx.Request) -> httpx.Response:
        assert req.method == "DELETE"
        return httpx.Response(202)

    make_client(handler).delete("j1")


class FakeLogs:
    """A task log per attempt, served in small chunks as the logs endpoint does."""

    def __init__(self, attempts: dict[int, str], chunk: int = 4) -> None:
        self.attempts, self.chunk = attempts, chunk

    def __call__(self, req: httpx.Request) -> httpx.Response:
        asked = req.url.params.get("attempt")
        attempt = int(asked) if asked is not None else max(self.attempts)
        text, offset = self.attempts[attempt], int(req.url.params["offset"])
        content = text[offset : offset + self.chunk]
        return httpx.Response(
            200,
            json={
                "content": content,
                "offset": offset,
                "next_offset": offset + len(content),
                "full_size": len(text),
                "attempt": attempt,
            },
        )


def test_log_tail_reads_on_from_where_it_stopped() -> None:
    logs = FakeLogs({1: "hello\n"})
    tail = client.LogTail(make_client(logs), "j1", "worker-0")

    assert "".join(tail.read()) == "hello\n"
    logs.attempts[1] += "more\n"
    assert "".join(tail.read()) == "more\n"
    assert "".join(tail.read()) == ""


def test_log_tail_finishes_the_old_attempt_before_following_a_new_one() -> None:
    logs = FakeLogs({1: "first run\n"})
    tail = client.LogTail(make_client(logs), "j1", "worker-0")
    assert "".join(tail.read()) == "first run\n"

    logs.attempts[1] += "crashed\n"
    logs.attempts[2] = "second run\n"

    assert "".join(tail.read()) == "crashed\nsecond run\n"
    assert tail.attempt == 2


def test_a_pinned_attempt_is_the_only_one_read() -> None:
    logs = FakeLogs({1: "first\n", 2: "second\n"})
    tail = client.LogTail(make_client(logs), "j1", "worker-0", attempt=1)

    assert "".join(tail.read()) == "first\n"


def test_follow_stops_once_the_job_ended_and_its_log_is_read() -> None:
    phases = iter(["Pending", "Running", "Running", "Completed"])
    logs = FakeLogs({1: ""})

    def handler(req: httpx.Request) -> httpx.Response:
        if req.url.path.endswith("/logs"):
            return logs(req)
        phase = next(phases)
        # The process writes its last lines just before the server sees it exit.
        logs.attempts[1] += f"line while {phase}\n"
        return httpx.Response(200, json={"status": {"phase": phase}})

    api = make_client(handler)
    seen: list[str] = []
    out: list[str] = []

    job = client.follow(
        api,
        "j1",
        client.LogTail(api, "j1", "worker-0"),
        out.append,
        lambda j: seen.append(j["status"]["phase"]),
        poll=0,
    )

    assert job["status"]["phase"] == "Completed"
    assert seen == ["Pending", "Running", "Running", "Completed"]
    assert "".join(out).splitlines() == [f"line while {p}" for p in seen]


def test_follow_watches_the_job_between_polls() -> None:
    asked: list[list[tuple[str, str]]] = []
    phases = iter(["Running", "Running", "Completed"])

    def handler(req: httpx.Request) -> httpx.Response:
        if req.url.path.endswith("/logs"):
            return FakeLogs({1: ""})(req)
        asked.append(list(req.url.params.multi_items()))
        return httpx.Response(200, json={"status": {"phase": next(phases)}})

    api = make_client(handler)
    job = client.follow(api, "j1", client.LogTail(api, "j1", "worker-0"), lambda _t: None,
                        poll=0.5)

    assert job["status"]["phase"] == "Completed"
    # The first read answers at once; each later one once the phase it saw has changed.
    assert asked == [[], [("watch", "Running"), ("timeout", "0.5")],
                     [("watch", "Running"), ("timeout", "0.5")]]


def test_the_client_imports_nothing_of_the_server() -> None:
    code = ("import sys, corral.sdk.client; "
            "print(' '.join(m for m in sys.modules if m.startswith('corral')))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}

    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True, env=env).stdout.split()

    assert "corral.sdk.client" in loaded
    assert [m for m in loaded if m not in ("corral", "corral.sdk")
            and not m.startswith(("corral.sdk.", "corral.domain"))] == []
