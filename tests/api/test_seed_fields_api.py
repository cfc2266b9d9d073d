"""The seed spec's fields over real HTTP: each honoured or refused at submit in the API's
error body, nothing made (auto_stop, volumes, summary, the application annotations); the
flavors' disk, the events' source filter, and a log's signed, expiring link."""

from __future__ import annotations

import shlex
import shutil
import sys
import time
import urllib.parse
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from corral.services import secretbox
from tests import conftest
from tests import factories as f


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[conftest.Live]:
    server = conftest.start_live(tmp_path_factory.mktemp("seed") / "home")
    yield server
    conftest.stop_live(server)


def _total(live: conftest.Live) -> int:
    r = live.http.post(live.path("/training-job-searches"), json={})
    assert r.status_code == 200, r.text
    return int(r.json()["total"])


def _ended(live: conftest.Live, **body: Any) -> dict[str, Any]:
    job = live.submit(f.make_job(**body))
    return live.wait(job["metadata"]["id"])


def _refused(live: conftest.Live, body: dict[str, Any]) -> str:
    before = _total(live)
    r = live.http.post(live.path("/training-jobs"), json=body)
    assert r.status_code == 400, r.text
    assert r.json()["error_code"] == "ModelArts.2788"
    assert _total(live) == before  # nothing made
    return str(r.json()["error_msg"])


def test_what_corral_cannot_honour_is_refused_in_words_and_nothing_is_made(
        live: conftest.Live, tmp_path: Any) -> None:
    with_volume = f.make_job(command="true")
    with_volume["spec"]["volumes"] = [{"nfs": {"nfs_server_path": "10.0.0.1:/d",
                                               "local_path": "/d"}}]
    assert "corral mounts no volumes" in _refused(live, with_volume)
    tensorboard = f.make_job(command="true", annotations={"tensorboard/enable": "true"})
    assert "TensorBoard shows the job's summary folder" in _refused(live, tensorboard)
    lab = f.make_job(command="true", annotations={"jupyter-lab/enable": "true"})
    assert "create a notebook" in _refused(live, lab)
    stop = f.make_job(command="true")
    stop["spec"]["auto_stop"] = {"time_unit": "DAYS", "duration": 1}
    assert "spec.auto_stop.time_unit" in _refused(live, stop)
    summary = f.make_job(command="true", outputs={"train_url": str(tmp_path / "out")})
    summary["algorithm"]["summary"] = {"log_type": "tensorboard",
                                       "log_dir": {"pfs": {"pfs_path": str(tmp_path / "tb")}}}
    assert "is in none of the job's output channels" in _refused(live, summary)


def test_auto_stop_is_kept_with_the_job(live: conftest.Live) -> None:
    body = f.make_job(command="true")
    body["spec"]["auto_stop"] = {"time_unit": "HOURS", "duration": 2}
    job = live.submit(body)
    assert job["spec"]["auto_stop"] == {"time_unit": "HOURS", "duration": 2}
    assert live.wait(job["metadata"]["id"])["status"]["phase"] == "Completed"


def test_a_job_writes_its_summaries_where_algorithm_summary_says(
        live: conftest.Live, tmp_path: Any) -> None:
    out = tmp_path / "out"
    write = ("import os; d = os.environ['CORRAL_SUMMARY_DIR']; os.makedirs(d); "
             "open(os.path.join(d, 'events.out'), 'w').write('x')")
    body = f.make_job(command=f"{shlex.quote(sys.executable)} -c {shlex.quote(write)}",
                      outputs={"train_url": str(out)})
    body["algorithm"]["summary"] = {"log_type": "tensorboard",
                                    "log_dir": {"pfs": {"pfs_path": str(out / "tb")}}}
    job = live.submit(body)
    assert live.wait(job["metadata"]["id"])["status"]["phase"] == "Completed"
    assert (out / "tb" / "events.out").read_text() == "x"
    assert job["algorithm"]["summary"]["log_dir"]["pfs"]["pfs_path"] == str(out / "tb")


def test_flavors_say_the_disk_a_task_may_use(live: conftest.Live) -> None:
    r = live.http.get(live.path("/training-job-flavors"))
    assert r.status_code == 200, r.text
    disks = [fl["flavor_info"]["disk"] for fl in r.json()["flavors"]]
    floor = int(live.settings.disk_free_floor_gb * 2**30)
    total = shutil.disk_usage(live.settings.runs_dir).total
    assert disks and all(d == {"size": (total - floor) // 2**30, "unit": "GB"} for d in disks)
    job = _ended(live, command="true")
    disk = job["spec"]["resource"]["flavor_detail"]["flavor_info"]["disk"]
    assert disk == {"size": str(disks[0]["size"]), "unit": "GB"}  # a string there


def test_events_are_filtered_by_source(live: conftest.Live) -> None:
    job_id = _ended(live, command="exit 3")["metadata"]["id"]

    def sources(**params: Any) -> list[str]:
        r = live.http.get(live.path(f"/training-jobs/{job_id}/events"), params=params)
        assert r.status_code == 200, r.text
        assert r.json()["total"] == len(r.json()["events"])
        return [e["source"] for e in r.json()["events"]]

    everything = sources()
    assert {"Job", "Task"} <= set(everything)
    assert sources(source="Task") == [s for s in everything if s == "Task"]
    assert sources(source="Job") == [s for s in everything if s == "Job"]
    assert sources(source="K8S") == []
    r = live.http.get(live.path(f"/training-jobs/{job_id}/events"), params={"source": "Pod"})
    assert r.status_code == 400 and r.json()["error_code"] == "ModelArts.2788", r.text
    assert "source" in r.json()["error_msg"]


def _link(live: conftest.Live, job_id: str, **headers: str) -> str:
    r = live.http.get(live.path(f"/training-jobs/{job_id}/tasks/worker-0/logs/url"),
                      headers=headers)
    assert r.status_code == 200, r.text
    return str(r.json()["obs_url"])


def test_a_logs_signed_link_opens_without_a_credential_until_it_expires(
        live: conftest.Live) -> None:
    job = _ended(live, command="echo first line; echo second line")
    job_id = job["metadata"]["id"]
    shown, saved = _link(live, job_id), _link(live, job_id,
                                              **{"Content-Type": "application/octet-stream"})
    assert shown.startswith(live.url + "/corral/log-links/")
    with httpx.Client(timeout=30) as anyone:  # no token, no signature
        r = anyone.get(shown)
        assert r.status_code == 200, r.text
        assert r.text == "first line\nsecond line\n"
        assert r.headers["content-disposition"].startswith("inline")
        assert r.headers["x-content-type-options"] == "nosniff"
        r = anyone.get(saved)
        assert r.status_code == 200 and r.text == "first line\nsecond line\n", r.text
        assert r.headers["content-disposition"].startswith("attachment")
        # another job's log, a later expiry or another attempt: the signature no longer fits
        url = urllib.parse.urlsplit(shown)
        query = dict(urllib.parse.parse_qsl(url.query))
        for change in ({"expires": str(int(query["expires"]) + 3600)}, {"attempt": "2"},
                       {"disposition": "attachment"}):
            r = anyone.get(url._replace(query=urllib.parse.urlencode({**query, **change}))
                           .geturl())
            assert r.status_code == 401, r.text
            assert r.json()["error_code"] == "ModelArts.2784"
        # a link made an hour ago (signed as the server signs) has expired
        box = secretbox.load(live.settings)
        expires = int(time.time()) - 1
        message = "\n".join((live.project_id, job_id, "worker-0", "1", str(expires), "inline"))
        stale = {**query, "expires": str(expires), "signature": box.sign_link(message)}
        r = anyone.get(url._replace(query=urllib.parse.urlencode(stale)).geturl())
        assert r.status_code == 401 and "the link expired" in r.json()["error_msg"], r.text
        # a deleted job's log opens no more
        assert live.http.delete(live.path(f"/training-jobs/{job_id}")).status_code == 202
        r = anyone.get(shown)
        assert r.status_code == 404 and r.json()["error_code"] == "ModelArts.2775", r.text


def test_a_log_link_is_refused_for_a_task_or_job_that_has_none(live: conftest.Live) -> None:
    job_id = _ended(live, command="true")["metadata"]["id"]
    r = live.http.get(live.path(f"/training-jobs/{job_id}/tasks/worker-7/logs/url"))
    assert r.status_code == 404 and r.json()["error_code"] == "ModelArts.2775", r.text
    r = live.http.get(live.path("/training-jobs/nope/tasks/worker-0/logs/url"))
    assert r.status_code == 404, r.text
    with httpx.Client(timeout=30) as anyone:  # the call itself needs a credential
        r = anyone.get(live.url + live.path(f"/training-jobs/{job_id}/tasks/worker-0/logs/url"))
        assert r.status_code == 401, r.text
