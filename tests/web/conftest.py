"""Fixtures of the console's end-to-end tests: Debian's Chromium driven by Playwright
against real `corral server` processes, a few servers shared by many tests.

Without Chromium or the `playwright` package the tests are skipped, unless CI=true, where
that fails the run (`.ci/run` installs Chromium). Set CORRAL_SCREENSHOTS to a folder
(docs/images) to keep the screenshots the tests take of the main views.
"""

from __future__ import annotations

import os
import pathlib
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from tests.web import live

CHROMIUM = os.environ.get("CORRAL_CHROMIUM", "/usr/bin/chromium")
#: what Chromium needs here: no sandbox as root, no GPU, no calls home from a closed network
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]
VIEWPORT = {"width": 1400, "height": 900}

pytestmark = pytest.mark.slow


def _missing() -> str | None:
    if not (shutil.which(CHROMIUM) or pathlib.Path(CHROMIUM).is_file()):
        return f"no Chromium at {CHROMIUM} (apt-get install chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install -e '.[test]')"
    return None


# Per module: Playwright's synchronous API holds an event loop in this thread while it
# runs, which tests elsewhere that start their own (asyncio.run) must not meet.
@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    problem = _missing()
    if problem:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{problem}, and CI=true")
        pytest.skip(problem)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        # Playwright gives each launch a fresh profile (--user-data-dir) of its own.
        b = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield b
        b.close()


class Console:
    """A browser page logged in to a server's console."""

    def __init__(self, page: Any, srv: live.Server) -> None:
        self.page = page
        self.srv = srv
        self.errors: list[str] = []
        page.on("pageerror", lambda e: self.errors.append(str(e)))

    def open(self, path: str = "") -> Any:
        self.page.goto(f"{self.srv.url}/console/{path.lstrip('/')}")
        return self.page

    def project(self, rest: str, project_id: str | None = None) -> Any:
        return self.open(f"p/{project_id or self.srv.project_id}/{rest.lstrip('/')}")

    def shot(self, name: str) -> None:
        """A screenshot of the page (kept in CORRAL_SCREENSHOTS, if set)."""
        folder = os.environ.get("CORRAL_SCREENSHOTS")
        data = self.page.screenshot()
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        if folder:
            pathlib.Path(folder).mkdir(parents=True, exist_ok=True)
            (pathlib.Path(folder) / f"{name}.png").write_bytes(data)


def console_for(browser: Any, srv: live.Server, token: str | None = None) -> Iterator[Console]:
    """A fresh browser context (its own storage), logged in with `token` (the admin's)."""
    context = browser.new_context(viewport=VIEWPORT, timezone_id="UTC")
    context.set_default_timeout(20_000)
    # (on the console's origin only: every page of the context runs it, notebooks' too)
    context.add_init_script(
        f"if (window.location.origin === {srv.url!r}) "
        f"window.localStorage.setItem('corral.token', {token or srv.token!r});")
    page = context.new_page()
    c = Console(page, srv)
    try:
        yield c
    finally:
        context.close()
    assert c.errors == [], f"the page failed: {c.errors}"


# --- figures the tests measure ------------------------------------------------------------

FIGURES = pytest.StashKey[list[str]]()


def report(request: Any, line: str) -> None:
    """A figure measured by a test, printed in the run's summary (no timing is asserted
    but loosely: the machine is shared and noisy)."""
    request.config.stash.setdefault(FIGURES, []).append(line)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for line in terminalreporter.config.stash.get(FIGURES, []):
        terminalreporter.write_line(line)
