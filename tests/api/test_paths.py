"""Paths a job names must stay where its project may read and write; logs stay the job's."""

from __future__ import annotations

import os
import pathlib
from collections.abc import Iterator
from typing import Any

import pytest

from tests import conftest, factories

REFUSED = (400, "ModelArts.2788")


def code_dir(folder: pathlib.Path) -> pathlib.Path:
    return factories.write_code(folder, "print('hi')\n")


def submit(http: Any, project_id: str, **job: Any) -> Any:
    return http.post(f"/v2/{project_id}/training-jobs", json=factories.make_job(**job))


def refused(r: Any, says: str = "outside the storage this project may use") -> bool:
    return (r.status_code, r.json()["error_code"]) == REFUSED and says in r.json()["error_msg"]


def total(http: Any, project_id: str) -> int:
    return int(http.post(f"/v2/{project_id}/training-job-searches", json={}).json()["total"])


def with_output(path: pathlib.Path | str) -> dict[str, Any]:
    return {"outputs": [{"name": "train_url", "remote": {"obs": {"obs_url": str(path)}}}]}


# --- the default project, open to the single user, but never to corral's own files -------


def test_the_default_project_may_not_touch_corrals_home(
        live_server: conftest.Live, tmp_path: pathlib.Path) -> None:
    live, home = live_server, live_server.settings.home
    done = live.submit(factories.make_job(name="first", command="echo secret-output"))
    live.wait(done["metadata"]["id"])
    runs = home / "runs" / done["metadata"]["id"]
    elsewhere = tmp_path / "link-to-home"
    elsewhere.symlink_to(home)

    cases = {
        "code in another job's run": {"code_dir": str(runs / "attempt-1" / "logs"),
                                      "boot_file": "worker-0.log"},
        "code is the home": {"code_dir": str(home), "boot_file": "credentials.json"},
        "input is the server key": {"command": "true", "inputs": [
            {"name": "k", "remote": {"obs": {"obs_url": str(home / "server.key")}}}]},
        "output into the runs": {"command": "true", **with_output(home / "runs" / "x")},
        "output through a symlink": {"command": "true", **with_output(elsewhere / "runs")},
        "output via ..": {"command": "true",
                          **with_output(f"{home}/demo/../runs/{done['metadata']['id']}")},
        "logs exported into the home": {"command": "true",
                                        "log_export_path": {"host_path": str(home / "x")}},
    }
    for what, job in cases.items():
        r = live.http.post(live.path("/training-jobs"), json=_job(what, job))
        assert refused(r), (what, r.text)
    assert total(live.http, live.project_id) == 1
    assert not (home / "runs" / "x").exists()


def _job(name: str, fields: dict[str, Any]) -> dict[str, Any]:
    body = factories.make_job(name="".join(c if c.isalnum() else "-" for c in name),
                              command="true")
    alg, spec = body["algorithm"], body["spec"]
    if "code_dir" in fields:
        alg.pop("command", None)
        alg.setdefault("boot_file", "train.py")
    alg.update({k: v for k, v in fields.items() if k != "log_export_path"})
    if "log_export_path" in fields:
        spec["log_export_path"] = fields["log_export_path"]
    return body


def test_the_default_project_may_use_the_users_own_directories(
        live_server: conftest.Live, tmp_path: pathlib.Path) -> None:
    code = code_dir(tmp_path)
    job = live_server.submit(factories.make_job(code_dir=code))

    assert live_server.wait(job["metadata"]["id"])["status"]["phase"] == "Completed"


# --- other projects: their own tree and the configured roots only -------------------------


@pytest.fixture
def confined(tmp_path: pathlib.Path) -> Iterator[tuple[conftest.Live, dict[str, pathlib.Path]]]:
    dirs = {name: tmp_path / name for name in ("shared", "team", "default-data", "outside")}
    for d in dirs.values():
        d.mkdir()
    live = conftest.start_live(tmp_path / "home", storage={
        "roots": [str(dirs["shared"])],
        "projects": {"team": [str(dirs["team"])], "default": [str(dirs["default-data"])]}})
    yield live, dirs
    conftest.stop_live(live)


def test_a_project_uses_its_tree_and_its_roots_and_nothing_else(
        confined: tuple[conftest.Live, dict[str, pathlib.Path]]) -> None:
    live, dirs = confined
    team = live.new_project("team")
    member = live.new_user("tess", "member", team)
    own_tree = live.settings.home / "projects" / team
    escape = own_tree / "escape"
    own_tree.mkdir(parents=True)
    escape.symlink_to(dirs["outside"])

    accepted = {"own tree": own_tree, "shared root": dirs["shared"], "team root": dirs["team"]}
    refused_dirs = {"outside": dirs["outside"],
                    "another project's root": dirs["default-data"],
                    "symlink out of the tree": escape,
                    "dot-dot out of the tree": own_tree / ".." / "other-project",
                    "the home": live.settings.home}
    for what, folder in accepted.items():
        r = submit(member.http, team, name=f"ok-{len(what)}", code_dir=code_dir(folder / "c"))
        assert r.status_code == 201, (what, r.text)
    for what, folder in refused_dirs.items():
        folder_code = str(code_dir(folder / "c"))  # real code, in a place not allowed
        for job in ({"code_dir": folder_code}, {"command": "true", **with_output(folder)}):
            r = member.http.post(f"/v2/{team}/training-jobs", json=_job(what, job))
            assert refused(r), (what, job, r.text)
    assert total(member.http, team) == len(accepted)


def test_a_default_project_with_roots_of_its_own_is_confined_too(
        confined: tuple[conftest.Live, dict[str, pathlib.Path]]) -> None:
    live, dirs = confined

    ok = submit(live.http, live.project_id, name="ok", code_dir=code_dir(dirs["default-data"]))
    outside = submit(live.http, live.project_id, name="no",
                     code_dir=code_dir(dirs["outside"]))
    absolute = live.http.post(live.path("/training-jobs"), json=_job("abs", {
        "command": "true", "inputs": [{"name": "d", "remote": {"obs": {"obs_url": "/etc"}}}]}))

    assert ok.status_code == 201, ok.text
    assert refused(outside) and refused(absolute)
    assert str(dirs["default-data"]) in outside.json()["error_msg"]
    assert total(live.http, live.project_id) == 1


# --- log and output endpoints answer for the job's own files only ------------------------


def test_log_endpoints_read_only_the_jobs_own_logs(live_server: conftest.Live) -> None:
    live = live_server
    secret = live.submit(factories.make_job(name="secret", command="echo the-secret"))
    mine = live.submit(factories.make_job(name="mine", command="echo mine"))
    for job in (secret, mine):
        live.wait(job["metadata"]["id"])
    mine_path = live.path(f"/training-jobs/{mine['metadata']['id']}")
    other_log = f"../../../{secret['metadata']['id']}/attempt-1/logs/worker-0"

    tricks = [
        f"{mine_path}/tasks/{other_log.replace('/', '%2F')}/logs/preview",
        f"{mine_path}/tasks/{other_log.replace('/', '%2F')}/logs",
        f"{mine_path}/tasks/worker-1/logs/preview",
        f"{mine_path}/tasks/..%2Fworker-0/logs",
        f"{mine_path}/tasks/worker-0/logs?attempt=2",
        f"{mine_path}/metrics/..%2F..%2F{secret['metadata']['id']}",
    ]
    for url in tricks:
        r = live.http.get(url)
        assert r.status_code in (400, 404), (url, r.text)
        assert "the-secret" not in r.text
    assert "mine" in live.http.get(f"{mine_path}/tasks/worker-0/logs").json()["content"]


def test_a_job_whose_code_links_outside_is_snapshotted_as_a_link(
        live_server: conftest.Live, tmp_path: pathlib.Path) -> None:
    """The server copies code_dir; a symlink in it is copied as a link, never followed."""
    secret = tmp_path / "not-for-jobs.txt"
    secret.write_text("server-side secret")
    code = factories.write_code(tmp_path / "code", "import os; print(os.path.islink('s'))\n")
    os.symlink(secret, code / "s")

    job = live_server.submit(factories.make_job(code_dir=code))
    live_server.wait(job["metadata"]["id"])

    snap = (live_server.settings.home / "runs" / job["metadata"]["id"] / "attempt-1" / "code")
    assert (snap / "s").is_symlink()
