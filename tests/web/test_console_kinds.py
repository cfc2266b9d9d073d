"""The console's other views against a real `corral server` (SQLite): a pipeline's DAG
drawn live, a learning loop's rounds, a model's alias moved, a version diff, a 1 GB log,
nodes, keys and administration. One server serves every test here."""

from __future__ import annotations

import pathlib
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests import factories, pipelines
from tests.integration import il_live
from tests.web import live
from tests.web.conftest import Console, console_for, report

GIB = 1024**3
#: writes a one-file model into its train_url channel
MAKE_MODEL = """
import pathlib, sys
args = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--"))
out = pathlib.Path(args["train_url"])
out.mkdir(parents=True, exist_ok=True)
(out / "weights.txt").write_text(args["v"])
"""


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[live.Server]:
    # room for a loop's service, a pipeline's tasks and the jobs of the tests at once
    with live.running(tmp_path_factory.mktemp("kinds") / "home", cpus=8) as s:
        yield s


@pytest.fixture
def console(browser: Any, srv: live.Server) -> Iterator[Console]:
    yield from console_for(browser, srv)


def expect(locator: Any, **kw: Any) -> Any:
    from playwright.sync_api import expect as pw_expect

    return pw_expect(locator, **kw)


def test_a_pipeline_s_dag_is_drawn_live_and_it_can_be_rerun(console: Console,
                                                            tmp_path: pathlib.Path) -> None:
    srv = console.srv
    code = pipelines.step_code(tmp_path)
    gate = tmp_path / "gate"
    body = pipelines.pipeline(
        "select",
        pipelines.task("prepare", code, outputs=("out_data",), sleep=0.5),
        pipelines.task("train", code, deps=("prepare",),
                       inputs={"in_data": "prepare.outputs.out_data"}, outputs=("out_model",),
                       metrics="acc:0.9", gate=str(gate), for_each=[{"lr": "0.1"}, {"lr": "0.01"}]),
        pipelines.task("evaluate", code, deps=("train",), exit=3),
    )
    made = srv.ok("POST", srv.path("/pipelines"), 201, json=body)
    page = console.project(f"pipelines/{made['id']}")
    dag = page.get_by_test_id("dag")
    expect(dag).to_have_attribute("data-ready", "true")
    expect(page.get_by_test_id("dag-node-train")).to_have_attribute("data-state", "running",
                                                                     timeout=30_000)
    expect(page.get_by_test_id("dag-node-prepare")).to_have_attribute("data-state", "success")
    expect(page.get_by_test_id("dag-node-evaluate")).to_have_attribute("data-state", "waiting")
    console.shot("pipeline")
    gate.touch()  # the two train runs go on; evaluate then fails
    expect(page.get_by_test_id("dag-node-evaluate")).to_have_attribute("data-state", "failed",
                                                                       timeout=30_000)
    expect(page.locator("h1 + .phase-line [data-state=failed]")).to_be_visible()
    expect(page.get_by_test_id("progress")).to_have_text("100%")
    bar = page.get_by_label("progress")  # in the failure's colour, not the running blue
    assert bar.evaluate("el => getComputedStyle(el).accentColor") == "rgb(185, 28, 28)"
    page.get_by_label("rerun mode").select_option("from_failed")
    page.get_by_role("button", name="Rerun").click()
    expect(page.get_by_text("attempt 2")).to_be_visible()
    assert srv.ok("GET", srv.path(f"/pipelines/{made['id']}"))["status"]["attempt"] == 2


def test_a_loop_s_rounds_render_with_their_verdicts(console: Console,
                                                    tmp_path: pathlib.Path) -> None:
    srv = console.srv
    il = il_live.IL(srv.http, srv.project_id, tmp_path)
    il.dataset(lines=[])
    il.initial_model(accuracy=0.5)
    il.create(il.spec(samples=2, period=1))
    il.append(["0.9", "0.9", "0.9", "0.9"])  # a better model: promoted
    il.wait_round(1, {"Promoted"}, timeout=90)
    page = console.project("loops/loop")
    round_1 = page.get_by_test_id("round-1")
    expect(round_1).to_contain_text("Promoted")
    expect(round_1).to_contain_text("verdict: promote")
    expect(round_1.locator("table")).to_contain_text("accuracy")
    il.append(["0.1", "0.1", "0.1", "0.1"])  # a worse one: rejected, shown as it happens
    round_2 = page.get_by_test_id("round-2")
    expect(round_2).to_contain_text("Rejected", timeout=60_000)
    expect(round_2).to_contain_text("verdict: reject")
    expect(page.get_by_label("rounds timeline").locator(".round-bar")).to_have_count(2)
    console.shot("loop")
    il.act("stop")


def test_a_model_s_alias_moves(console: Console, tmp_path: pathlib.Path) -> None:
    srv = console.srv
    code = factories.write_code(tmp_path, MAKE_MODEL)
    for v in (1, 2):
        body = factories.make_job(name=f"make-v{v}", code_dir=code, parameters={"v": v},
                                  outputs={"train_url": str(tmp_path / f"v{v}")})
        body["metadata"]["annotations"] = {"corral/model-name": "classifier"}
        srv.wait(srv.submit(body), {"Completed"})
    factories.wait_for(lambda: srv.http.get(srv.path("/models/classifier")).json().get(
        "version_count") == 2, 30, "two versions registered")
    page = console.project("models/classifier")
    asked: list[str] = []

    def answer(dialog: Any) -> None:
        asked.append(dialog.message)
        dialog.accept()

    page.on("dialog", answer)
    expect(page.get_by_test_id("model-versions").locator("tbody tr")).to_have_count(2)
    expect(page.get_by_test_id("model-versions")).to_contain_text("make-v1")  # lineage
    page.get_by_label("alias").fill("production")
    page.get_by_label("version").select_option("1")
    page.get_by_role("button", name="Move alias").click()
    expect(page.get_by_test_id("alias-production")).to_have_text("v1")
    page.get_by_label("version").select_option("2")
    page.get_by_role("button", name="Move alias").click()
    expect(page.get_by_test_id("alias-production")).to_have_text("v2")
    assert srv.ok("GET", srv.path("/models/classifier"))["aliases"] == {"production": 2}
    assert asked[-1].startswith("Move production from v1 to v2?"), asked  # each move asked first
    page.get_by_role("button", name="history").click()
    expect(page.get_by_test_id("alias-history").locator("li")).to_have_count(2)
    expect(page.get_by_test_id("alias-history")).to_contain_text(f"v1 → v2 by {srv.user}")
    with page.expect_download() as got:
        page.get_by_role("button", name="Download").first.click()
    assert got.value.suggested_filename == "classifier-v2.tar.gz"
    console.shot("model")


def test_versions_side_by_side_and_a_new_version_from_the_page(console: Console) -> None:
    srv = console.srv
    body = factories.make_job(name="tuned", command="echo hi", parameters={"lr": "0.1"})
    first = srv.submit(body)
    srv.wait(first, {"Completed"})
    page = console.project(f"jobs/{first}")
    page.get_by_role("button", name="New version").click()
    page.get_by_label("value of lr").fill("0.01")
    page.get_by_role("button", name="Start it").click()
    expect(page.get_by_role("heading", name=re.compile("tuned V0002"))).to_be_visible()
    page.get_by_role("link", name="Versions").click()
    diff = page.get_by_test_id("version-diff")
    expect(diff.locator("tr.changed").filter(has_text="parameter lr")).to_contain_text("0.01")
    console.shot("versions")


def test_a_1_gib_log_opens_at_its_end_and_is_searched_and_read_back(
        console: Console, request: Any) -> None:
    srv = console.srv
    job_id = srv.submit(factories.make_job(name="big-log", command="echo started"))
    srv.wait(job_id, {"Completed"})
    tail = "".join(f"line {i} near the end\n" for i in range(2000)) + "the very last line\n"
    live.grow_log(srv.log_path(job_id), GIB, b"the very first line\nneedle at the start\n",
                  tail.encode())
    started = time.monotonic()
    page = console.project(f"jobs/{job_id}/logs")
    log = page.get_by_test_id("log")
    expect(log).to_contain_text("the very last line")
    opened = time.monotonic() - started
    expect(page.get_by_test_id("log-status")).to_contain_text("of 1.0 GiB")
    log.evaluate("el => el.scrollTop = 0")  # the window before is read as the reader scrolls
    expect(page.get_by_test_id("log-status")).to_contain_text("loading", timeout=5000)
    started = time.monotonic()
    page.get_by_label("search the log").fill("needle at the start")
    page.get_by_role("button", name="Search").click()
    expect(page.get_by_test_id("search-progress")).to_contain_text("1 line(s) found",
                                                                    timeout=60_000)
    expect(page.get_by_test_id("search-progress")).not_to_contain_text("searched")
    searched = time.monotonic() - started
    page.locator(".matches button").first.click()
    expect(log).to_contain_text("the very first line")
    report(request, f"a 1 GiB log opened at its end in {opened:.2f} s; searched whole "
           f"in {searched:.2f} s")
    assert opened < 5  # loosely: the machine is shared and noisy


def test_a_log_downloads_whole(console: Console) -> None:
    srv = console.srv
    job_id = srv.submit(factories.make_job(name="small-log", command="seq 1 20000"))
    srv.wait(job_id, {"Completed"})
    page = console.project(f"jobs/{job_id}/logs")
    expect(page.get_by_test_id("log")).to_contain_text("20000")
    with page.expect_download() as got:
        page.get_by_role("button", name="Download").click()
    assert got.value.suggested_filename == "small-log-worker-0-attempt-1.log"
    assert pathlib.Path(got.value.path()).read_text() == "".join(f"{i}\n" for i in range(1, 20001))


def test_nodes_keys_and_administration(console: Console) -> None:
    srv = console.srv
    page = console.project("jobs")  # by now, jobs of every kind: the list's picture
    expect(page.get_by_role("row").filter(has_text="pipeline task").first).to_be_visible()
    console.shot("jobs")
    page = console.project("nodes")
    expect(page.get_by_test_id("nodes-default").locator("tbody tr")).to_have_count(1)
    # The node's own use over time: a chart uPlot drew (its canvas), sampled from the start.
    node = srv.ok("GET", "/corral/info")["nodes"][0]["name"]
    usage = page.get_by_test_id(f"usage-{node}")
    expect(usage.get_by_test_id(f"chart-CPU and memory {node}").locator("canvas")).to_have_count(1)
    expect(usage).to_contain_text("CPU % of")
    page.get_by_test_id("usage-span").select_option("15")
    expect(usage.locator("canvas")).to_have_count(1)
    console.shot("nodes")
    page = console.project("access")
    page.get_by_role("button", name="New token").click()
    expect(page.get_by_role("status")).to_contain_text("crl_")
    page = console.open("admin")
    page.get_by_label("new user").fill("carol")
    page.get_by_role("button", name="Create user").click()
    expect(page.get_by_role("status")).to_contain_text("crl_")
    page.get_by_label("project for carol").select_option(label="default")
    page.get_by_label("role for carol").select_option("viewer")
    page.get_by_role("row").filter(has_text="carol").get_by_role("button", name="Set").click()
    expect(page.get_by_role("row").filter(has_text="carol")).to_contain_text("default: viewer")
    users = srv.ok("GET", "/corral/users")["users"]
    assert next(u for u in users if u["name"] == "carol")["projects"] == {srv.project_id: "viewer"}


def test_a_viewer_sees_but_cannot_act(browser: Any, srv: live.Server) -> None:
    made = srv.ok("POST", "/corral/users", 201,
                  json={"name": "vic", "projects": {srv.project_id: "viewer"}})
    job_id = srv.submit(factories.make_job(name="seen", command="sleep 30"))
    for c in console_for(browser, srv, made["token"]):
        page = c.project(f"jobs/{job_id}")
        expect(page.get_by_role("heading", name=re.compile("seen"))).to_be_visible()
        expect(page.get_by_role("button", name="Stop")).to_have_count(0)
        expect(page.get_by_test_id("user")).to_contain_text("vic")
        expect(page.get_by_role("link", name="Administration")).to_have_count(0)
    srv.ok("POST", srv.path(f"/training-jobs/{job_id}/actions"), 202,
           json={"action_type": "terminate"})


def test_a_notebook_is_made_opened_in_jupyterlab_and_stopped_from_the_console(
        console: Console) -> None:
    page = console.project("notebooks")
    page.get_by_role("button", name="New notebook").click()
    page.get_by_label("notebook name").fill("scratch")
    page.get_by_role("button", name="Create").click()
    row = page.locator("tr").filter(has_text="scratch")
    expect(row).to_contain_text("RUNNING", timeout=90_000)

    with page.expect_popup() as opened:  # its one-time address logs this browser in
        row.get_by_role("link", name="Open").click()
    lab = opened.value
    lab.wait_for_load_state()
    assert re.search(r"/notebooks/[^/]+/lab", lab.url), lab.url
    expect(lab).to_have_title(re.compile("JupyterLab"), timeout=30_000)
    # What a notebook's page runs (JupyterLab's, or whatever a job served in its place)
    # reaches nothing of the console's: another origin, the port included.
    assert page.evaluate("() => localStorage.getItem('corral.token')") == console.srv.token
    assert lab.evaluate("() => localStorage.getItem('corral.token')") is None
    reach = lab.evaluate("""async (url) => {
        const w = window.open(url);
        for (let i = 0; i < 600; i++) {  // until it shows the console, or is out of reach
            try {
                if (w.location.href.startsWith(url) && w.document.readyState === 'complete') break;
            } catch (e) { break; }
            await new Promise((done) => setTimeout(done, 50));
        }
        try { return w.localStorage.getItem('corral.token'); }
        catch (e) { return 'refused: ' + e.name; }
        finally { w.close(); }
    }""", f"{console.srv.url}/console/")
    assert reach == "refused: SecurityError", reach
    lab.close()

    page.on("dialog", lambda dialog: dialog.accept())  # Stop and Delete ask first
    row.get_by_role("button", name="Stop").click()
    expect(row).to_contain_text("STOPPED", timeout=60_000)
    row.get_by_role("button", name="Delete").click()
    expect(page.get_by_text("No notebook yet.")).to_be_visible(timeout=60_000)
    assert console.errors == []
