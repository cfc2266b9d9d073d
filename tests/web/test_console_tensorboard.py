"""A job's TensorBoard from the console, against a real `corral server`: the job's page links
it, the link opens TensorBoard's own app in a tab of its own (its one-time token logs this
browser in), the app draws the scalar the job wrote, and its pages reach nothing of the
console's."""

from __future__ import annotations

import pathlib
import shlex
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.api import test_tensorboard as tb
from tests.web import live
from tests.web.conftest import Console, console_for


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[live.Server]:
    with live.running(tmp_path_factory.mktemp("tensorboard") / "home") as s:
        yield s


@pytest.fixture
def console(browser: Any, srv: live.Server) -> Iterator[Console]:
    yield from console_for(browser, srv)


def test_the_job_page_opens_its_tensorboard_which_draws_what_the_job_wrote(
        console: Console, tmp_path: pathlib.Path) -> None:
    from playwright.sync_api import expect

    srv = console.srv
    job_id = srv.submit(tb.summary_job(tmp_path, name="tb-scalars", command=(
        f"{shlex.quote(sys.executable)} -c {shlex.quote(tb.WRITE)}")))
    assert srv.wait(job_id)["status"]["phase"] == "Completed"

    page = console.project(f"jobs/{job_id}")
    with page.expect_popup() as opened:
        page.get_by_test_id("tensorboard").click()
    board = opened.value
    board.wait_for_load_state()
    assert board.url.endswith(f"/training-jobs/{job_id}/tensorboard/"), board.url  # no token
    expect(board.get_by_text("loss").first).to_be_visible(timeout=60_000)
    # Another origin than the console's (the notebooks' port): its pages hold no token of it.
    assert page.evaluate("() => localStorage.getItem('corral.token')") == srv.token
    assert board.evaluate("() => localStorage.getItem('corral.token')") is None
    assert console.errors == []
