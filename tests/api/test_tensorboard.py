"""A job's TensorBoard (`tensorboard/enable: true`) behind a live server: a real TensorBoard
over the event file a real job wrote, reached through corral's proxy on the notebooks'
origin with a credential or the show body's link (refused without), started when opened
and stopped when idle or when its job is deleted; and the jobs that cannot have one,
refused at submit with nothing made.

One server serves the module, with TensorBoards stopped after 2 s of nothing.
"""

from __future__ import annotations

import os
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from corral.executors.local import tensorboard as tbprocess
from corral.services import tensorboards
from tests import conftest
from tests import factories as f
from tests.api import test_sdk

pytestmark = pytest.mark.slow
IDLE_S = 2.0
#: what the job writes: five steps of a scalar, with TensorBoard's own writer
WRITE = ("import os; from tensorboard import summary; "
         "w = summary.Writer(summary.DirectoryOutput(os.environ['CORRAL_SUMMARY_DIR'])); "
         "[w.add_scalar('loss', 1.0 / (s + 1), step=s) for s in range(5)]; w.close()")


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[conftest.Live]:
    server = conftest.start_live(tmp_path_factory.mktemp("tensorboard") / "home",
                                 tensorboard_idle=IDLE_S)
    yield server
    conftest.stop_live(server)


@pytest.fixture(scope="module")
def job(live: conftest.Live, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A completed job that wrote its summaries, shown."""
    out = tmp_path_factory.mktemp("out")
    made = live.submit(summary_job(out, command=f"{shlex.quote(sys.executable)} -c "
                                                f"{shlex.quote(WRITE)}"))
    assert live.wait(made["metadata"]["id"])["status"]["phase"] == "Completed"
    return live.job(made["metadata"]["id"])


def summary_job(out: Any, log_type: str = "tensorboard", **body: Any) -> dict[str, Any]:
    made = f.make_job(outputs={"train_url": str(out)},
                      annotations={"tensorboard/enable": "true"}, **body)
    made["algorithm"]["summary"] = {"log_type": log_type,
                                    "log_dir": {"pfs": {"pfs_path": f"{out}/tb"}}}
    return made


def board(live: conftest.Live, job_id: str, rest: str = "") -> str:
    return f"{live.embedded.notebook_url}/training-jobs/{job_id}/tensorboard/{rest}"


def tags(http: httpx.Client, live: conftest.Live, job_id: str, **kw: Any) -> httpx.Response:
    return http.get(board(live, job_id, "data/plugin/scalars/tags"), timeout=120, **kw)


def test_the_show_body_links_the_job_s_tensorboard(live: conftest.Live,
                                                   job: dict[str, Any]) -> None:
    found = job["endpoints"]["tensorboard"]
    assert found["url"] == board(live, job["metadata"]["id"])
    assert found["token"]
    plain = live.submit(f.make_job(command="true"))
    assert "endpoints" not in live.job(plain["metadata"]["id"])


def test_the_official_sdk_reads_the_link_and_its_token_opens_the_page(
        live: conftest.Live, job: dict[str, Any]) -> None:
    sdk = test_sdk.connect(live)
    shown = sdk.job(job["metadata"]["id"]).endpoints.tensorboard
    sdk.client.get_http_client().close()
    assert shown.url == board(live, job["metadata"]["id"])
    with httpx.Client() as browser:
        assert browser.get(f"{shown.url}?token={shown.token}").status_code == 302
        assert tags(browser, live, job["metadata"]["id"]).status_code == 200


def test_a_real_tensorboard_serves_the_job_s_summaries_to_a_credential_only(
        live: conftest.Live, job: dict[str, Any]) -> None:
    job_id = job["metadata"]["id"]
    with httpx.Client() as anonymous:
        assert tags(anonymous, live, job_id).status_code == 401
    served = tags(live.http, live, job_id)
    assert served.status_code == 200, served.text
    assert "loss" in served.json()["."]
    points = live.http.get(board(live, job_id, "data/plugin/scalars/scalars"),
                           params={"run": ".", "tag": "loss"})
    assert [(step, round(v, 3)) for _t, step, v in points.json()] == [
        (s, round(1.0 / (s + 1), 3)) for s in range(5)]
    page = live.http.get(board(live, job_id))
    assert page.status_code == 200 and "<tb-webapp>" in page.text
    assert live.http.get(board(live, job_id, "index.js")).status_code == 200


def test_its_answers_are_compressed_only_when_asked_and_have_one_date(
        live: conftest.Live, job: dict[str, Any]) -> None:
    job_id = job["metadata"]["id"]
    with conftest.http_client(live.url, live.login.token) as plain:
        del plain.headers["accept-encoding"]
        r = tags(plain, live, job_id)
    assert r.status_code == 200 and "loss" in r.json()["."]
    assert "content-encoding" not in r.headers
    assert len(r.headers.get_list("date")) == len(r.headers.get_list("server")) == 1
    assert tags(live.http, live, job_id).headers["content-encoding"] == "gzip"  # asked


def test_the_link_logs_a_browser_in_once_and_its_cookie_only_works_from_its_pages(
        live: conftest.Live, job: dict[str, Any]) -> None:
    job_id = job["metadata"]["id"]
    link = f"{board(live, job_id)}?token={live.job(job_id)['endpoints']['tensorboard']['token']}"
    with httpx.Client() as browser:
        opened = browser.get(link)
        assert opened.status_code == 302, opened.text
        assert opened.headers["location"] == f"/training-jobs/{job_id}/tensorboard/"
        cookie = opened.headers["set-cookie"].lower()
        assert "httponly" in cookie and f"path=/training-jobs/{job_id}/tensorboard/" in cookie
        assert tags(browser, live, job_id).status_code == 200
        assert browser.get(link).status_code == 302  # opened again: it has the cookie
        other_site = tags(browser, live, job_id, headers={"Origin": "http://evil.example"})
        assert other_site.status_code == 403
        elsewhere = browser.get(f"{live.embedded.notebook_url}/training-jobs/{job_id}x/"
                                "tensorboard/data/plugin/scalars/tags")
        assert elsewhere.status_code == 401  # the cookie is the one job's
    with httpx.Client() as stranger:
        assert stranger.get(link).status_code == 401  # spent
        forged = link[:-4] + ("0000" if not link.endswith("0000") else "1111")
        assert stranger.get(forged).status_code == 401


def test_the_api_s_port_sends_browsers_to_the_notebooks_origin(
        live: conftest.Live, job: dict[str, Any]) -> None:
    job_id = job["metadata"]["id"]
    r = live.http.get(f"/training-jobs/{job_id}/tensorboard/")
    assert r.status_code == 307
    assert r.headers["location"] == board(live, job_id)


def test_another_project_gets_404_and_a_viewer_may_look(live: conftest.Live,
                                                        job: dict[str, Any]) -> None:
    job_id = job["metadata"]["id"]
    outsider = live.new_user("tb-outsider", project_id=live.new_project("tb-elsewhere"),
                             key=False)
    refused = tags(outsider.http, live, job_id)
    # answered as a job that does not exist: neither its project nor that it exists shows
    assert refused.status_code == 404
    assert refused.json() == {"error_code": "ModelArts.2775",
                              "error_msg": f"training job '{job_id}' does not exist"}
    viewer = live.new_user("tb-viewer", role="viewer", key=False)
    assert tags(viewer.http, live, job_id).status_code == 200


def test_it_stops_when_idle_and_starts_again_when_opened(live: conftest.Live,
                                                         job: dict[str, Any]) -> None:
    job_id = job["metadata"]["id"]
    boards = live.embedded.platform.context.tensorboards
    assert tags(live.http, live, job_id).status_code == 200
    assert job_id in boards.running()
    test_sdk.poll(lambda: job_id not in boards.running(), IDLE_S + 10,
                  "the idle TensorBoard stopped")
    assert tags(live.http, live, job_id).status_code == 200
    assert job_id in boards.running()


def test_a_deleted_job_s_tensorboard_stops(live: conftest.Live, tmp_path: Any) -> None:
    made = live.submit(summary_job(tmp_path, command="true"))
    job_id = made["metadata"]["id"]
    live.wait(job_id)
    assert tags(live.http, live, job_id).status_code == 200  # no summaries yet: none shown
    boards = live.embedded.platform.context.tensorboards
    assert job_id in boards.running()
    assert live.http.delete(live.path(f"/training-jobs/{job_id}")).status_code == 202
    test_sdk.poll(lambda: job_id not in boards.running(), 10, "its TensorBoard stopped")
    # (the proxy reads a job again after a second at most)
    test_sdk.poll(lambda: tags(live.http, live, job_id).status_code == 404, 10,
                  "the deleted job's TensorBoard is gone")


def test_past_tensorboard_max_the_least_recently_used_stops(
        live: conftest.Live, job: dict[str, Any], tmp_path: Any) -> None:
    other = live.submit(f.make_job(command="true"))["metadata"]["id"]
    settings = live.settings.model_copy(update={"home": tmp_path, "tensorboard_max": 1})
    boards = tensorboards.Boards(settings, live.embedded.platform.store)
    try:
        first = boards.open(job["metadata"]["id"], str(tmp_path))
        boards.done(first)
        second = boards.open(other, str(tmp_path))
        boards.done(second)
        assert boards.running() == [other]
        assert not first.process.alive() and second.process.alive()
    finally:
        boards.close()
    assert not second.process.alive()


@pytest.mark.skipif(os.geteuid() != 0, reason="another user's view needs root")
def test_no_other_user_reaches_it_past_the_proxy(live: conftest.Live,
                                                 job: dict[str, Any]) -> None:
    boards = live.embedded.platform.context.tensorboards
    held = boards.open(job["metadata"]["id"],  # (in use meanwhile: not stopped as idle)
                       job["algorithm"]["summary"]["log_dir"]["pfs"]["pfs_path"])
    try:
        assert tags(live.http, live, job["metadata"]["id"]).status_code == 200
        probe = ("import socket, sys\n"
                 "s = socket.socket(socket.AF_UNIX)\n"
                 "try:\n    s.connect(sys.argv[1]); print('connected')\n"
                 "except OSError as exc:\n    print('refused', type(exc).__name__)\n")
        seen = subprocess.run(["/usr/bin/python3", "-I", "-c", probe, str(held.sock)],
                              user="nobody", capture_output=True, text=True, cwd="/",
                              check=True)
        assert seen.stdout.strip() == "refused PermissionError"
        with socket.socket(socket.AF_UNIX) as s:  # the server (root) can: it is there
            s.connect(str(held.sock))
    finally:
        boards.done(held)


def _refused(live: conftest.Live, body: dict[str, Any]) -> str:
    before = live.http.post(live.path("/training-job-searches"), json={}).json()["total"]
    r = live.http.post(live.path("/training-jobs"), json=body)
    assert r.status_code == 400, r.text
    assert live.http.post(live.path("/training-job-searches"), json={}).json()["total"] == before
    return str(r.json()["error_msg"])


def test_a_job_that_cannot_have_one_is_refused_in_words(
        live: conftest.Live, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    bare = f.make_job(command="true", annotations={"tensorboard/enable": "true"})
    assert "the job names none: give algorithm.summary" in _refused(live, bare)
    insight = summary_job(tmp_path, log_type="mindstudio-insight", command="true")
    assert "corral serves TensorBoard only" in _refused(live, insight)
    monkeypatch.setattr(tensorboards, "installed", lambda: False)
    assert "TensorBoard is not installed beside corral's server" in _refused(
        live, summary_job(tmp_path, command="true"))
    off = f.make_job(command="true", annotations={"tensorboard/enable": "false"})
    assert live.submit(off)["metadata"]["annotations"]["tensorboard/enable"] == "false"


def test_a_tensorboard_that_cannot_start_says_why(live: conftest.Live,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  tmp_path: Any) -> None:
    made = live.submit(summary_job(tmp_path, command="true"))
    job_id = made["metadata"]["id"]
    monkeypatch.setattr(tbprocess, "_script",
                        lambda: "import sys; sys.exit('no TensorBoard here after all')")
    r = tags(live.http, live, job_id)
    assert r.status_code == 503, r.text
    assert r.json()["error_code"] == "ModelArts.6404"
    time.sleep(0.5)
    again = tags(live.http, live, job_id)  # not started again at once, and says why
    assert again.status_code == 503, again.text
    assert "ended: no TensorBoard here after all" in again.json()["error_msg"]
