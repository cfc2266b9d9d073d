"""The console's files at /console, in front of the API: any page of the app is its
index (so a deep link opens it), assets are cached for good, and everything else goes to
the API untouched."""

from __future__ import annotations

import asyncio
import concurrent.futures
import pathlib
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.types import ASGIApp

from corral.web import console


class Client:
    """Requests straight to an ASGI application, no server in between."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    def request(self, method: str, path: str, **kw: Any) -> httpx.Response:
        async def go() -> httpx.Response:
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=self.app),
                                         base_url="http://corral") as c:
                return await c.request(method, path, **kw)
        # a thread of its own: a test run that drives a browser (tests/web) holds an event
        # loop in this one
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            return pool.submit(asyncio.run, go()).result()

    def get(self, path: str, **kw: Any) -> httpx.Response:
        return self.request("GET", path, **kw)

    def post(self, path: str, **kw: Any) -> httpx.Response:
        return self.request("POST", path, **kw)


@pytest.fixture
def client(tmp_path: pathlib.Path) -> Client:
    static = tmp_path / "static"
    (static / "assets").mkdir(parents=True)
    (static / "index.html").write_text("<html>the app</html>")
    (static / "assets" / "index-abc123.js").write_text("console.log(1);" * 200)
    (tmp_path / "secret.txt").write_text("not for you")

    async def api(request: object) -> PlainTextResponse:
        return PlainTextResponse("the API")

    app = Starlette(routes=[Route("/{path:path}", api, methods=["GET", "POST"])])
    return Client(console.wrap(app, static))


def test_every_page_of_the_app_is_its_index(client: Client) -> None:
    for path in ("/console/", "/console/p/abc/jobs/1234/logs", "/console/login"):
        r = client.get(path)
        assert r.status_code == 200 and r.text == "<html>the app</html>", path
        assert r.headers["cache-control"] == "no-cache"
        assert "default-src 'self'" in r.headers["content-security-policy"]


def test_assets_are_served_compressed_and_cached_for_good(client: Client) -> None:
    r = client.get("/console/assets/index-abc123.js", headers={"Accept-Encoding": "gzip"})
    assert r.status_code == 200 and r.text.startswith("console.log(1);")
    assert r.headers["content-encoding"] == "gzip"
    assert "immutable" in r.headers["cache-control"]
    assert client.get("/console/assets/gone-999.js").status_code == 404


def test_nothing_outside_the_static_folder_is_served(client: Client) -> None:
    for path in ("/console/../secret.txt", "/console/%2e%2e/secret.txt",
                 "/console/assets/../../secret.txt"):
        r = client.get(path)
        assert "not for you" not in r.text, path


def test_the_rest_goes_to_the_api(client: Client) -> None:
    assert client.get("/v2/p/training-jobs").text == "the API"
    assert client.get("/consoles").text == "the API"
    assert client.post("/").text == "the API"
    r = client.get("/")
    assert r.status_code == 307 and r.headers["location"] == "/console/"
    assert client.get("/console").headers["location"] == "/console/"
    r = client.post("/console/")
    assert r.status_code == 405 and r.headers["allow"] == "GET, HEAD"


def test_an_unbuilt_console_says_how_to_build_it(tmp_path: pathlib.Path) -> None:
    app = Starlette()
    r = Client(console.wrap(app, tmp_path / "none")).get("/console/jobs")
    assert r.status_code == 404 and "npm run build" in r.text


def test_the_package_ships_a_built_console() -> None:
    index = console.STATIC / "index.html"
    assert index.is_file(), "src/corral/web/static is empty: run `npm ci && npm run build` in web/"
    assert '<script type="module"' in index.read_text()
    assert "/console/assets/" in index.read_text()
