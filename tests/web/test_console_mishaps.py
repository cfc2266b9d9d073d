"""The console when things go wrong or go fast, against a real `corral server` (SQLite): a
view's code file that does not arrive (a server restarting, a network blip, an upgrade that
renamed the files), the app's own code missing, a filter clicked while a typed name waits,
an action that cannot be taken back, and an address that names no page."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests import factories
from tests.web import live
from tests.web.conftest import Console, console_for

QUEUE_CODE = "**/console/assets/Queue-*.js"
#: how long a view's loads may take before it gives up (lib/load.tsx waits 0.3 + 1 + 3 s)
GIVE_UP = 30_000


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[live.Server]:
    with live.running(tmp_path_factory.mktemp("mishaps") / "home", cpus=2) as s:
        yield s


@pytest.fixture
def console(browser: Any, srv: live.Server) -> Iterator[Console]:
    yield from console_for(browser, srv)


def expect(locator: Any, **kw: Any) -> Any:
    from playwright.sync_api import expect as pw_expect

    return pw_expect(locator, **kw)


def _failing(times: int | None) -> tuple[list[str], Any]:
    """A route handler that aborts the first `times` requests (every one: None)."""
    seen: list[str] = []

    def handle(route: Any) -> None:
        seen.append(route.request.url)
        if times is None or len(seen) <= times:
            route.abort("connectionreset")
        else:
            route.continue_()

    return seen, handle


# --- code files that do not arrive -------------------------------------------------------------


def test_a_view_whose_code_file_fails_once_is_loaded_again(console: Console) -> None:
    seen, handle = _failing(1)
    console.page.route(QUEUE_CODE, handle)
    page = console.project("jobs")
    page.get_by_role("link", name="Queue & quotas").click()
    expect(page.get_by_role("heading", name="Queue and quotas")).to_be_visible(timeout=GIVE_UP)
    assert len(seen) == 2  # failed, then asked for again
    expect(page.get_by_role("alert")).to_have_count(0)


def test_a_view_whose_code_file_never_arrives_says_so_and_offers_a_reload(
        console: Console) -> None:
    seen, handle = _failing(None)
    console.page.route(QUEUE_CODE, handle)
    page = console.project("queue")
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("could not be loaded from the server", timeout=GIVE_UP)
    expect(page.get_by_role("button", name="Reload")).to_be_visible()
    expect(page.get_by_role("link", name="Jobs")).to_be_visible()  # the app is still there
    tries = len(seen)
    assert tries >= 2
    page.get_by_role("button", name="Try again").click()  # still down: said again
    expect(alert).to_contain_text("could not be loaded from the server", timeout=GIVE_UP)
    assert len(seen) > tries
    page.unroute(QUEUE_CODE)  # the server is back
    page.get_by_role("button", name="Reload").click()
    expect(page.get_by_role("heading", name="Queue and quotas")).to_be_visible()


def test_the_app_s_own_code_missing_is_said_in_words(console: Console) -> None:
    seen, handle = _failing(None)
    console.page.route("**/console/assets/index-*.js", handle)
    page = console.project("jobs")
    expect(page.get_by_text("The console's code has not arrived from the server")).to_be_visible(
        timeout=GIVE_UP)
    assert seen
    expect(page.get_by_role("link", name="Reload")).to_be_visible()


# --- the jobs list's filters -------------------------------------------------------------------


def test_a_phase_clicked_while_a_typed_name_waits_is_kept(console: Console) -> None:
    srv = console.srv
    srv.wait(srv.submit(factories.make_job(name="filtered-out", command="exit 3")), {"Failed"})
    page = console.project("jobs")
    expect(page.get_by_role("link", name="filtered-out")).to_be_visible()
    page.get_by_label("search names").fill("no-such-name")
    page.get_by_role("button", name="Failed", exact=True).click()  # within the typing pause
    expect(page).to_have_url(re.compile(r"name=no-such-name"))
    assert "phase=Failed" in page.url, page.url
    expect(page.get_by_role("button", name="Failed", exact=True)).to_have_attribute(
        "aria-pressed", "true")
    expect(page.get_by_text("No job matches.")).to_be_visible()


# --- what cannot be taken back is asked about first ---------------------------------------------


def test_stop_asks_first_and_a_no_leaves_the_job_running(console: Console) -> None:
    srv = console.srv
    job_id = srv.submit(factories.make_job(name="asked", command="sleep 300"))
    srv.wait(job_id, {"Running"})
    page = console.project(f"jobs/{job_id}")
    actions: list[str] = []

    def acted(request: Any) -> None:
        if request.method == "POST" and "/actions" in request.url:
            actions.append(request.url)

    page.on("request", acted)
    asked: list[str] = []

    def dismiss(dialog: Any) -> None:
        asked.append(dialog.message)
        dialog.dismiss()

    page.once("dialog", dismiss)
    page.get_by_role("button", name="Stop").click()
    assert asked and asked[0].startswith("Stop asked?"), asked
    page.evaluate("() => new Promise(requestAnimationFrame)")  # what the click did is done
    assert actions == []
    assert srv.job(job_id)["status"]["phase"] == "Running"
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Stop").click()
    expect(page.locator("h1 + .phase-line [data-state=Terminated]")).to_be_visible(
        timeout=30_000)
    assert len(actions) == 1


# --- addresses ---------------------------------------------------------------------------------


def test_an_address_that_names_no_page_says_so(console: Console) -> None:
    srv = console.srv
    job_id = srv.submit(factories.make_job(name="tabbed", command="true"))
    for path in (f"p/{srv.project_id}/no-such-view", "no-such-page",
                 f"p/{srv.project_id}/jobs/{job_id}/no-such-tab"):
        page = console.open(path)
        expect(page.get_by_role("heading", name="Not found")).to_be_visible()
        assert page.url.endswith(f"/console/{path}")  # not led to another page
        expect(page.get_by_role("heading", name="Jobs", exact=True)).to_have_count(0)
    page.get_by_role("link", name="Go to the jobs").click()
    expect(page.get_by_role("heading", name="Jobs", exact=True)).to_be_visible()
    page = console.open("")
    expect(page).to_have_url(re.compile(f"/console/p/{srv.project_id}/jobs$"))
