"""Creating a job in the console, against a real `corral server` (SQLite): the form makes
a job that reads a dataset version and runs to completion, a saved algorithm fills in its
parameters, a bad value is said beside its field (found by the form, or refused by the
API), two jobs ticked in the list are stopped at once, and a failed job's page shows its
last log lines and copies its id."""

from __future__ import annotations

import json
import pathlib
import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests import factories
from tests.web import live
from tests.web.conftest import Console, console_for

TRAIN = """
import argparse, pathlib
p = argparse.ArgumentParser()
p.add_argument("--epochs", type=int)
p.add_argument("--train_url")
p.add_argument("--data_url")
a = p.parse_args()
samples = pathlib.Path(a.data_url, "samples.txt").read_text().split() if a.data_url else []
for i in range(a.epochs):
    print(f"epoch {i}", flush=True)
pathlib.Path(a.train_url, "model.txt").write_text(f"{a.epochs} epochs, {len(samples)} samples")
"""


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[live.Server]:
    with live.running(tmp_path_factory.mktemp("create") / "home", cpus=2) as s:
        yield s


@pytest.fixture
def console(browser: Any, srv: live.Server) -> Iterator[Console]:
    yield from console_for(browser, srv)


@pytest.fixture
def code(tmp_path: pathlib.Path) -> pathlib.Path:
    folder = tmp_path / "code"
    folder.mkdir()
    (folder / "train.py").write_text(TRAIN)
    return folder


def expect(locator: Any, **kw: Any) -> Any:
    from playwright.sync_api import expect as pw_expect

    return pw_expect(locator, **kw)


def _posts(page: Any) -> list[str]:
    """The bodies of the job creates the page sends, as they are sent."""
    sent: list[str] = []
    page.on("request", lambda r: sent.append(r.post_data or "")
            if r.method == "POST" and r.url.endswith("/training-jobs") else None)
    return sent


def test_a_job_made_with_the_form_reads_a_dataset_version_and_runs_to_completion(
        console: Console, code: pathlib.Path, tmp_path: pathlib.Path) -> None:
    srv = console.srv
    out = tmp_path / "out"
    index = tmp_path / "samples.txt"
    index.write_text("a\nb\nc\n")
    srv.ok("POST", srv.path("/datasets"), 201, json={"name": "letters", "url": str(index)})
    version = srv.ok("POST", srv.path("/datasets/letters/versions"), 201, json={})
    page = console.project("jobs")
    page.get_by_role("link", name="Create training job").click()
    expect(page.get_by_role("heading", name="Create training job")).to_be_visible()
    sent = _posts(page)
    page.get_by_label("name", exact=True).fill("made-in-form")
    page.get_by_label("code folder", exact=True).fill(str(code))
    page.get_by_label("boot file", exact=True).fill("train.py")
    page.get_by_role("button", name="add a parameter").click()
    page.get_by_label("parameter name").fill("epochs")
    page.get_by_label("value of epochs").fill("3")
    page.get_by_role("button", name="add an output").click()
    page.get_by_label("output name").fill("train_url")
    page.get_by_label("output path train_url").fill(str(out))
    page.get_by_role("button", name="add an input").click()
    page.get_by_label("input name").fill("data_url")
    page.get_by_label("what data_url reads").select_option(label="a dataset version")
    page.get_by_label("dataset of data_url").select_option(label="letters")
    expect(page.get_by_label("version of data_url")).to_have_value(version["version_id"])
    page.get_by_label("retries").fill("1")
    expect(page.get_by_test_id("free-now")).to_contain_text("room for 2 tasks of this flavor")
    preview = page.get_by_test_id("preview")
    expect(preview).to_contain_text('"obs_url": "' + str(out))
    expect(preview).to_contain_text('"version_id": "' + version["version_id"])
    shown = json.loads(preview.inner_text())
    page.evaluate("() => document.querySelector('main').scrollTo(0, 0)")
    console.shot("create-job")
    page.get_by_role("button", name="Create", exact=True).click()
    expect(page).to_have_url(re.compile(r"/jobs/[0-9a-f-]{36}$"))
    assert [json.loads(s) for s in sent] == [shown]  # what was previewed is what was sent
    expect(page.locator("h1 + .phase-line [data-state=Completed]")).to_be_visible(
        timeout=60_000)
    job = srv.job(page.url.rsplit("/", 1)[1])
    assert job["metadata"]["name"] == "made-in-form"
    assert job["metadata"]["annotations"]["fault-tolerance/job-retry-num"] == "1"
    assert (out / "model.txt").read_text() == "3 epochs, 3 samples"
    read = job["algorithm"]["inputs"][0]["remote"]["dataset"]
    assert (read["name"], read["version_name"]) == ("letters", "V0001")


def test_an_algorithm_fills_in_its_parameters_and_a_bad_value_is_said_beside_its_field(
        console: Console, code: pathlib.Path) -> None:
    srv = console.srv
    srv.ok("POST", srv.path("/algorithms"), 201, json={
        "metadata": {"name": "epochs-alg"},
        "job_config": {"code_dir": str(code), "boot_file": "train.py", "parameters": [
            {"name": "epochs", "value": "2", "description": "passes",
             "constraint": {"type": "Integer", "required": True, "valid_type": "Range",
                            "valid_range": ["1", "10"]}}],
            "outputs": [{"name": "train_url"}]}})
    page = console.project("jobs/new")
    sent = _posts(page)
    page.get_by_label("name", exact=True).fill("from-algorithm")
    page.get_by_label("a saved algorithm").check()
    page.get_by_role("combobox", name="algorithm").select_option(label="epochs-alg")
    value = page.get_by_label("value of epochs")
    expect(value).to_have_value("2")
    expect(page.get_by_text("passes · Integer, required, 1 to 10")).to_be_visible()
    value.fill("30")
    page.get_by_label("output path train_url").fill(str(code.parent / "alg-out"))
    page.get_by_role("button", name="Create", exact=True).click()
    expect(page.get_by_test_id("error-param:0")).to_have_text("30 is outside [1, 10]")
    assert sent == []  # the form found it: nothing was sent

    # one the server finds: beside the field its answer names
    page.get_by_label("a code folder and boot file").check()
    page.get_by_label("code folder", exact=True).fill(str(code.parent / "no-such-folder"))
    page.get_by_label("boot file", exact=True).fill("train.py")
    page.get_by_role("button", name="Create", exact=True).click()
    expect(page.get_by_test_id("error-code_dir")).to_contain_text("is not a directory")
    expect(page.get_by_label("code folder", exact=True)).to_have_attribute("aria-invalid", "true")
    expect(page.get_by_test_id("error-top")).to_have_count(0)
    assert len(sent) == 1
    assert "/jobs/new" in page.url  # nothing made, still on the form


def test_two_ticked_jobs_are_stopped_at_once(console: Console) -> None:
    srv = console.srv
    ids = [srv.submit(factories.make_job(name=f"batch-{n}", command="sleep 300"))
           for n in ("a", "b")]
    for job_id in ids:
        srv.wait(job_id, {"Running"})
    page = console.project("jobs")
    for n in ("a", "b"):
        page.get_by_label(f"tick batch-{n}", exact=True).check()
    asked: list[str] = []

    def answer(dialog: Any) -> None:
        asked.append(dialog.message)
        dialog.accept()

    page.once("dialog", answer)
    page.get_by_role("button", name="Stop 2 jobs").click()
    expect(page.get_by_test_id("batch-outcome")).to_contain_text("Stopped 2 of 2 jobs.")
    assert len(asked) == 1 and asked[0].startswith("Stop 2 jobs?"), asked
    for job_id in ids:
        assert srv.wait(job_id, {"Terminated"}, timeout=30)["status"]["phase"] == "Terminated"
    for n in ("a", "b"):
        row = page.get_by_role("row").filter(has=page.get_by_role("link", name=f"batch-{n}"))
        expect(row.locator("[data-state=Terminated]")).to_be_visible(timeout=20_000)


def test_a_failed_job_shows_its_last_log_lines_and_its_id_is_copied(console: Console) -> None:
    srv = console.srv
    script = ("for i in range(40): print(f'step {i}')\n"
              "raise SystemExit('ValueError: the loss is nan')")
    job_id = srv.submit(factories.make_job(name="fails-at-a-glance", command=live.py(script)))
    srv.wait(job_id, {"Failed"})
    console.page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page = console.project(f"jobs/{job_id}")
    lines = page.get_by_test_id("last-lines")
    expect(lines).to_contain_text("ValueError: the loss is nan")
    expect(lines).to_contain_text("step 39")
    expect(lines).not_to_contain_text("step 20")  # the last 20 lines, not the whole log
    page.get_by_role("button", name="copy the job's id").click()
    expect(page.get_by_role("button", name="copy the job's id")).to_have_text("Copied")
    assert page.evaluate("() => navigator.clipboard.readText()") == job_id
    lines.get_by_role("link", name="the whole log").click()
    expect(page).to_have_url(re.compile(r"/logs\?task=worker-0$"))
