"""The console's hyperparameter search and compare views against a real `corral server`:
a search's page with its trials (the best marked, parameters against the reward, learning
curves, importance and a parameter's plot), a trial and the search stopped from the page,
and two jobs ticked in the list compared side by side. Tiny trials: a few steps each."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration import search_rig as rig
from tests.web import live
from tests.web.conftest import Console, console_for


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[live.Server]:
    with live.running(tmp_path_factory.mktemp("search") / "home", cpus=4) as s:
        yield s


@pytest.fixture
def console(browser: Any, srv: live.Server) -> Iterator[Console]:
    yield from console_for(browser, srv)


@pytest.fixture(scope="module")
def done(srv: live.Server, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A finished search of four trials, each reporting its accuracy by log_metrics."""
    code = rig.code(tmp_path_factory.mktemp("code"))
    body = rig.body(code, rig.policy("tpe_search", samples=4, parallel=2), use_metrics="1")
    body["metadata"]["name"] = "hp"
    job_id = srv.submit(body)
    assert srv.wait(job_id, timeout=120)["status"]["phase"] == "Completed"
    table = srv.ok("GET", srv.path(f"/training-jobs/{job_id}/autosearch-trials"))
    return {"id": job_id, "rows": table["items"]["data"], "code": code}


def expect(locator: Any, **kw: Any) -> Any:
    from playwright.sync_api import expect as pw_expect

    return pw_expect(locator, **kw)


def test_a_search_s_page_shows_its_trials_best_curves_and_importance(
        console: Console, done: dict[str, Any]) -> None:
    rows = done["rows"]
    best = max(rows, key=lambda r: float(r[4]))
    page = console.project(f"jobs/{done['id']}")
    page.get_by_role("link", name="Trials").click()
    table = page.get_by_test_id("trials")
    expect(table.locator("tbody tr")).to_have_count(4)
    for r in rows:
        row = page.get_by_test_id(f"trial-{r[0]}")
        expect(row).to_have_attribute("data-state", "completed")
        expect(row.get_by_role("link")).to_have_attribute(
            "href", f"/console/p/{console.srv.project_id}/jobs/{r[5]}")
    expect(page.get_by_test_id(f"trial-{best[0]}")).to_contain_text("★ best")
    expect(page.get_by_test_id("best-trial")).to_contain_text(f"trial {best[0]},")
    expect(page.get_by_test_id("parallel").locator("polyline")).to_have_count(4)
    expect(page.get_by_test_id(f"pc-trial-{best[0]}")).to_have_class("best")
    curves = page.get_by_test_id("chart-accuracy by trial")
    expect(curves.locator("canvas")).to_have_count(1)  # uPlot drew it
    for r in rows:
        expect(curves).to_contain_text(f"trial {r[0]}")
    importance = page.get_by_test_id("importance")
    expect(importance.locator("li")).to_have_count(2)
    importance.get_by_role("button", name="lr").click()
    plot = page.get_by_role("img", name="lr against the reward")
    expect(plot).to_be_visible()
    assert plot.evaluate("img => img.naturalWidth") > 0  # the server's SVG, drawn
    console.shot("search")
    # sorted by the reward, the best comes first
    table.get_by_role("button", name="accuracy").click()
    expect(table.locator("tbody tr").first).to_have_attribute("data-testid", f"trial-{best[0]}")


def test_a_trial_and_then_the_search_are_stopped_from_the_page(
        console: Console, done: dict[str, Any]) -> None:
    srv = console.srv
    body = rig.body(done["code"], rig.policy(samples=3, parallel=1), steps=2000, pause=0.05)
    body["metadata"]["name"] = "long"
    job_id = srv.submit(body)
    asked: list[str] = []

    def answer(dialog: Any) -> None:
        asked.append(dialog.message)
        dialog.accept()

    page = console.project(f"jobs/{job_id}/trials")
    page.on("dialog", answer)
    first = page.get_by_test_id("trial-0")
    expect(first).to_have_attribute("data-state", "running", timeout=30_000)
    first.get_by_role("button", name="Stop trial").click()
    expect(first).to_have_attribute("data-state", "early_stopped", timeout=30_000)
    expect(first.get_by_test_id("ended-early")).to_contain_text("stopped early by hand")
    # the search goes on with its next trial; Stop ends it and that trial
    expect(page.get_by_test_id("trial-1")).to_have_attribute("data-state", "running",
                                                              timeout=30_000)
    page.get_by_role("button", name="Stop", exact=True).click()
    expect(page.locator("h1 + .phase-line [data-state=Terminated]")).to_be_visible(
        timeout=30_000)
    expect(page.get_by_test_id("trial-1")).to_have_attribute("data-state", "stopped",
                                                             timeout=30_000)
    assert asked[0].startswith("Stop trial 0 of long now?")
    assert asked[1].startswith("Stop the search long?")


def test_two_jobs_ticked_in_the_list_are_compared(console: Console,
                                                   done: dict[str, Any]) -> None:
    a, b = done["rows"][0], done["rows"][1]
    page = console.project("jobs?name=hp-trial")
    page.get_by_label(f"tick hp-trial-{a[0]}", exact=True).check()
    compare = page.get_by_role("button", name="Compare")
    expect(compare).to_be_disabled()
    page.get_by_label(f"tick hp-trial-{b[0]}", exact=True).check()
    page.get_by_role("button", name="Compare 2 jobs").click()
    table = page.get_by_test_id("compare")
    expect(table.locator("thead a")).to_have_text([f"hp-trial-{a[0]}", f"hp-trial-{b[0]}"])
    lr = table.locator("tr:has(th:text-is('--lr'))")
    expect(lr).to_have_class("changed")  # two samples of a continuous range differ
    expect(lr.locator("td")).to_have_text([a[2], b[2]])
    same = table.locator("tr:has(th:text-is('--use_metrics'))")
    expect(same).to_have_attribute("data-differs", "false")
    chart = page.get_by_test_id("chart-accuracy (max)")
    expect(chart.locator("canvas")).to_have_count(1)
    expect(chart).to_contain_text(f"hp-trial-{a[0]}")
    expect(chart).to_contain_text(f"hp-trial-{b[0]}")
    console.shot("compare")


def test_a_job_that_is_no_search_has_no_trials_page(console: Console,
                                                     done: dict[str, Any]) -> None:
    trial = done["rows"][0][5]  # a trial is a plain job
    page = console.project(f"jobs/{trial}/trials")
    expect(page.get_by_role("heading", name="Not found")).to_be_visible()
    page = console.project(f"jobs/{trial}")
    expect(page.get_by_role("link", name="search")).to_have_attribute(
        "href", f"/console/p/{console.srv.project_id}/jobs/{done['id']}/trials")
