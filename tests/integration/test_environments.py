"""Jobs that ask for Python packages run in a cached environment built for them: real uv,
real installs from this machine's package index, a live server."""

from __future__ import annotations

import os
import pathlib
import time
from collections.abc import Iterator
from typing import Any

import pytest

from corral.services import environments
from corral.storage import envs
from tests import conftest, factories

Live = conftest.Live
#: imports the package it is given and prints where it came from and which python ran it
SHOW = """
import importlib, sys
mod = importlib.import_module(sys.argv[1].split("=", 1)[1])
print("module-from", mod.__file__)
print("python", sys.executable)
"""


@pytest.fixture
def live(tmp_path: pathlib.Path) -> Iterator[Live]:
    live = conftest.start_live(tmp_path / "home", cpus=4)
    yield live
    conftest.stop_live(live)


def job_with(tmp_path: pathlib.Path, module: str, requirements: list[str],
             **overrides: Any) -> dict[str, Any]:
    code = factories.write_code(tmp_path, SHOW)
    body = factories.make_job(code_dir=code, parameters={"module": module}, **overrides)
    body["algorithm"]["engine"] = {"requirements": requirements}
    return body


def messages(live: Live, job_id: str) -> list[str]:
    r = live.http.get(live.path(f"/training-jobs/{job_id}/events"), params={"limit": 100})
    assert r.status_code == 200, r.text
    return [e["message"] for e in r.json()["events"]]


def log_of(live: Live, job_id: str) -> str:
    r = live.http.get(live.path(f"/training-jobs/{job_id}/tasks/worker-0/logs/preview"))
    assert r.status_code == 200, r.text
    return str(r.json()["content"])


def built(live: Live, job_id: str) -> bool:
    return any(m.startswith("Building environment") for m in messages(live, job_id))


def test_a_job_runs_with_its_packages_and_a_second_reuses_the_environment(
        live: Live, tmp_path: pathlib.Path) -> None:
    first = live.submit(job_with(tmp_path, "six", ["six"]))["metadata"]["id"]

    done = live.wait(first, timeout=120)

    assert done["status"]["phase"] == "Completed", (done["status"], messages(live, first))
    cache = envs.Cache(live.settings.envs_dir)
    [key] = cache.built()
    out = log_of(live, first)
    assert f"module-from {cache.folder(key)}/lib/" in out, out
    assert f"python {cache.folder(key)}/bin/python" in out, out
    said = messages(live, first)
    assert any(m.startswith(f"Building environment {key} with uv") for m in said), said
    assert any(m.startswith(f"Environment {key} built in") for m in said), said
    # the same request spelt otherwise: the same environment, not built again
    second = live.submit(job_with(tmp_path, "six", ["SIX", "six"]))["metadata"]["id"]
    assert live.wait(second, timeout=60)["status"]["phase"] == "Completed"
    assert not built(live, second)
    assert any(m.startswith(f"Using environment {key} (cached") for m in
               messages(live, second))
    assert cache.built() == [key]


def test_jobs_asking_at_once_build_once(live: Live, tmp_path: pathlib.Path) -> None:
    ids = [live.submit(job_with(tmp_path, "tomli", ["tomli"]))["metadata"]["id"]
           for _ in range(5)]

    ends = [live.wait(i, timeout=120) for i in ids]

    assert [e["status"]["phase"] for e in ends] == ["Completed"] * 5
    assert sum(built(live, i) for i in ids) == 1
    waited = [i for i in ids if any(m.startswith("Waiting for environment") for m in
                                    messages(live, i))]
    assert waited, "no job waited for the one build"
    assert len(envs.Cache(live.settings.envs_dir).built()) == 1


def test_a_package_that_does_not_exist_fails_the_job_with_the_installers_message(
        live: Live, tmp_path: pathlib.Path) -> None:
    job_id = live.submit(job_with(tmp_path, "six",
                                  ["corral-no-such-package-4711"]))["metadata"]["id"]

    done = live.wait(job_id, timeout=120)

    status = done["status"]
    assert (status["phase"], status["secondary_phase"]) == ("Failed", "CreateFailed")
    assert status["reason"].startswith("installing failed (exit 1):"), status
    assert "corral-no-such-package-4711 was not found" in status["reason"], status
    assert "$ " not in status["reason"]  # the installer's words, not the server's paths
    cache = envs.Cache(live.settings.envs_dir)
    assert cache.built() == []  # no broken entry: the next job builds it afresh


def test_an_environment_no_job_used_for_days_is_removed(live: Live,
                                                        tmp_path: pathlib.Path) -> None:
    job_id = live.submit(job_with(tmp_path, "six", ["six"]))["metadata"]["id"]
    assert live.wait(job_id, timeout=120)["status"]["phase"] == "Completed"
    cache = envs.Cache(live.settings.envs_dir)
    [key] = cache.built()
    store = live.embedded.platform.store
    now = time.time()

    assert environments.collect(store, live.settings, now) == []  # used just now

    long_ago = now - (live.settings.environments_keep_days + 1) * 86400
    os.utime(cache.folder(key) / envs.USED, (long_ago, long_ago))
    assert environments.collect(store, live.settings, now) == [key]
    assert cache.built() == [] and not cache.log_path(key).exists()


def test_an_environment_a_job_that_has_not_ended_uses_is_kept(
        live: Live, tmp_path: pathlib.Path) -> None:
    code = factories.write_code(tmp_path, "import time, six\ntime.sleep(60)\n")
    body = factories.make_job(code_dir=code)
    body["algorithm"]["engine"] = {"requirements": ["six"]}
    job_id = live.submit(body)["metadata"]["id"]
    live.wait(job_id, {"Running"}, timeout=120)
    cache = envs.Cache(live.settings.envs_dir)
    [key] = cache.built()
    old = time.time() - 30 * 86400
    os.utime(cache.folder(key) / envs.USED, (old, old))

    assert environments.collect(live.embedded.platform.store, live.settings, time.time()) == []
    assert cache.is_ready(key)


def test_without_uv_the_environment_is_built_with_venv_and_pip(tmp_path: pathlib.Path) -> None:
    live = conftest.start_live(tmp_path / "home", cpus=4, environment_installer="pip")
    try:
        job_id = live.submit(job_with(tmp_path, "six", ["six"]))["metadata"]["id"]
        done = live.wait(job_id, timeout=180)
        assert done["status"]["phase"] == "Completed", messages(live, job_id)
        [key] = envs.Cache(live.settings.envs_dir).built()
        assert any(m.startswith(f"Building environment {key} with venv and pip")
                   for m in messages(live, job_id))
        assert f"module-from {live.settings.envs_dir / key}/lib/" in log_of(live, job_id)
    finally:
        conftest.stop_live(live)


@pytest.mark.parametrize(("requirements", "says"), [
    (["-e ."], "installer options are not taken"),
    (["--index-url=https://elsewhere.example/simple"], "installer options are not taken"),
    (["six @ https://example.com/six.whl"], "direct reference"),
    (["six @ file:///etc"], "direct reference"),
    (["six==="], "is not valid"),
    ([""], "one line"),
])
def test_bad_requirements_are_refused_at_submit(live: Live, tmp_path: pathlib.Path,
                                                requirements: list[str], says: str) -> None:
    r = live.http.post(live.path("/training-jobs"),
                       json=job_with(tmp_path, "six", requirements))

    assert r.status_code == 400, r.text
    assert r.json()["error_code"] == "ModelArts.2788"
    assert says in r.json()["error_msg"]
    found = live.http.post(live.path("/training-job-searches"), json={}).json()
    assert found["items"] == []


def test_image_url_is_refused_saying_what_the_server_lacks(live: Live,
                                                         tmp_path: pathlib.Path) -> None:
    body = job_with(tmp_path, "six", [])
    body["algorithm"]["engine"] = {"image_url": "swr.example.com/train:1"}

    r = live.http.post(live.path("/training-jobs"), json=body)

    assert r.status_code == 400, r.text
    assert r.json()["error_code"] == "ModelArts.2788"
    assert "needs container_runtime = 'podman'" in r.json()["error_msg"]
