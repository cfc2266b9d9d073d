"""Notebooks with a real JupyterLab behind a live server: the official SDK's life cycle, a
kernel through the proxy's websocket, the workspace across sessions, leases that stop a
notebook, and who may reach one.

One server serves the module; each test removes its notebooks, so that the two cores'
flavors are free for the next. Leases are seconds long and the idle check runs often
(`notebook_check_interval`).
"""

from __future__ import annotations

import contextlib
import http.server
import json
import pathlib
import re
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import httpx_ws
import pytest
from huaweicloudsdkcore.exceptions import exceptions as sdk_errors
from huaweicloudsdkmodelarts.v1 import model as ma

from tests import conftest, factories
from tests.api import test_sdk

pytestmark = pytest.mark.slow
FLAVOR = "corral.cpu.1u"


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[conftest.Live]:
    # A home whose sockets' paths are longer than a unix socket's address holds (108
    # bytes): notebooks work under any CORRAL_HOME.
    home = tmp_path_factory.mktemp("notebooks-in-a-home-with-a-long-path" + "-x" * 20) / "home"
    assert len(str(home / "jupyter" / ("0" * 16 + "-1.sock"))) > 108
    server = conftest.start_live(home, notebook_check_interval=0.2)
    yield server
    conftest.stop_live(server)


# --- helpers -------------------------------------------------------------------------------


def path(live: conftest.Live, rest: str = "") -> str:
    return f"/v1/{live.project_id}/notebooks{rest}"


def create(live: conftest.Live, name: str, **body: Any) -> dict[str, Any]:
    r = live.http.post(path(live), json={"name": name, "flavor": FLAVOR, **body})
    assert r.status_code == 201, r.text
    return dict(r.json())


def show(live: conftest.Live, nb_id: str) -> dict[str, Any]:
    r = live.http.get(path(live, f"/{nb_id}"))
    assert r.status_code == 200, r.text
    return dict(r.json())


#: the statuses of a notebook whose session failed: it does not come up by itself
FAILED = {"CREATE_FAILED", "START_FAILED", "ERROR"}


def wait(live: conftest.Live, nb_id: str, status: str, timeout: float = 60) -> dict[str, Any]:
    found: dict[str, Any] = {}

    def reached() -> bool:
        found.update(show(live, nb_id))
        if found["status"] in FAILED and status not in FAILED:
            raise AssertionError(f"notebook {nb_id} is {found['status']}, not {status}")
        return found["status"] == status

    try:
        test_sdk.poll(reached, timeout, f"notebook {nb_id} is {status}")
    except AssertionError as e:  # (what it was at the end, not at the start)
        events = live.http.get(path(live, f"/{nb_id}/events")).json().get("events")
        raise AssertionError(f"{e}: it is {found}; its events: {events}") from None
    return found


def remove(live: conftest.Live, nb_id: str) -> None:
    live.http.delete(path(live, f"/{nb_id}"))
    test_sdk.poll(lambda: live.http.get(path(live, f"/{nb_id}")).status_code == 404, 60,
                  f"notebook {nb_id} is gone")


def proxied(live: conftest.Live, nb_id: str, rest: str) -> str:
    """The address of `rest` of the notebook's JupyterLab: on the notebooks' own port."""
    return f"{live.embedded.notebook_url}/notebooks/{nb_id}/{rest}"


def run_code(live: conftest.Live, nb_id: str, kernel: str, code: str, *,
             http: httpx.Client | None = None, wait_result: bool = True) -> str | None:
    """Execute `code` in a kernel over the proxied websocket; its result (text/plain)."""
    client = http or live.http
    msg_id = uuid.uuid4().hex
    message = {
        "header": {"msg_id": msg_id, "username": "test", "session": uuid.uuid4().hex,
                   "msg_type": "execute_request", "version": "5.3"},
        "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
        "content": {"code": code, "silent": False, "store_history": False,
                    "user_expressions": {}, "allow_stdin": False, "stop_on_error": True},
    }
    url = proxied(live, nb_id, f"api/kernels/{kernel}/channels?session_id={uuid.uuid4().hex}")
    with httpx_ws.connect_ws(url, client) as ws:
        ws.send_json(message)
        while True:
            reply = ws.receive_json(timeout=60)
            if reply.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            if (not wait_result and reply["msg_type"] == "status"
                    and reply["content"]["execution_state"] == "busy"):
                return None
            if reply["msg_type"] == "execute_result":
                return str(reply["content"]["data"]["text/plain"])
            if reply["msg_type"] == "error":
                raise AssertionError(reply["content"])


def new_kernel(live: conftest.Live, nb_id: str, http: httpx.Client | None = None) -> str:
    r = (http or live.http).post(proxied(live, nb_id, "api/kernels"), json={"name": "python3"})
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


# --- the tests -----------------------------------------------------------------------------


def test_the_official_sdk_drives_a_notebooks_life_cycle(live: conftest.Live) -> None:
    sdk = test_sdk.connect(live)
    engine = live.http.get(f"/v2/{live.project_id}/training-job-engines").json()["items"][0]
    made = sdk.call("create_notebook", ma.CreateNotebookRequest(body=ma.NotebookCreateRequest(
        name="sdk-notebook", description="made by the SDK", flavor=FLAVOR,
        image_id=engine["engine_id"], volume=ma.VolumeMountRequest(category="EFS",
                                                                   ownership="MANAGED"),
        lease=ma.LeaseReq(duration=3_600_000, type="timing"))))
    assert made.status == "CREATING" and made.lease.type == "timing"

    def status() -> str:
        return str(sdk.call("show_notebook", ma.ShowNotebookRequest(id=made.id)).status)

    test_sdk.poll(lambda: status() == "RUNNING", 60, "the SDK's notebook runs")
    listed = sdk.call("list_notebooks", ma.ListNotebooksRequest(name="sdk-notebook"))
    assert [n.id for n in listed.data] == [made.id] and listed.total == 1
    shown = sdk.call("show_notebook", ma.ShowNotebookRequest(id=made.id))
    assert shown.url.endswith(f"/notebooks/{made.id}/lab?token={shown.token}")
    lease = sdk.call("show_lease", ma.ShowLeaseRequest(id=made.id))
    assert (lease.type, lease.duration) == ("timing", 3_600_000)

    renewed = sdk.call("renew_lease", ma.RenewLeaseRequest(
        id=made.id, body=ma.LeaseReq(duration=7_200_000, type="timing")))
    assert renewed.create_at + renewed.duration > lease.create_at + lease.duration

    sdk.call("update_notebook", ma.UpdateNotebookRequest(
        id=made.id, body=ma.NotebookUpdateRequest(description="renamed by the SDK")))
    stopping = sdk.call("stop_notebook", ma.StopNotebookRequest(id=made.id))
    assert stopping.status in ("STOPPING", "STOPPED")
    test_sdk.poll(lambda: status() == "STOPPED", 60, "the SDK's notebook stops")
    sdk.call("start_notebook", ma.StartNotebookRequest(id=made.id, duration=1_800_000))
    test_sdk.poll(lambda: status() == "RUNNING", 60, "the SDK's notebook runs again")
    assert sdk.call("show_lease", ma.ShowLeaseRequest(id=made.id)).duration == 1_800_000

    sdk.call("delete_notebook", ma.DeleteNotebookRequest(id=made.id))
    test_sdk.poll(lambda: live.http.get(path(live, f"/{made.id}")).status_code == 404, 60,
                  "the SDK's notebook is gone")
    with pytest.raises(sdk_errors.ClientRequestException) as refused:
        sdk.call("show_notebook", ma.ShowNotebookRequest(id=made.id))
    assert refused.value.status_code == 404
    sdk.client.get_http_client().close()


def test_a_kernel_runs_through_the_proxy_and_the_workspace_outlives_its_session(
        live: conftest.Live) -> None:
    nb = create(live, "kernel-and-files")
    nb = wait(live, nb["id"], "RUNNING")
    kernel = new_kernel(live, nb["id"])
    assert run_code(live, nb["id"], kernel,
                    "open('kept.txt', 'w').write('hello'); 1+1") == "2"

    r = live.http.post(path(live, f"/{nb['id']}/stop"))
    assert r.status_code == 200, r.text
    answers = set()  # while it stops: JupyterLab's answer, or "not running", never a 500
    while live.http.get(path(live, f"/{nb['id']}")).json()["status"] != "STOPPED":
        answers.add(live.http.get(proxied(live, nb["id"], "api/status")).status_code)
    assert answers <= {200, 503}, answers
    stopped = wait(live, nb["id"], "STOPPED")
    assert stopped["stop_reason"] == "stopped by admin"
    workspace = pathlib.Path(stopped["volume"]["mount_path"])
    assert (workspace / "kept.txt").read_text() == "hello"
    assert live.http.get(proxied(live, nb["id"], "api/status")).status_code == 503

    live.http.post(path(live, f"/{nb['id']}/start"))
    wait(live, nb["id"], "RUNNING")
    r = live.http.get(proxied(live, nb["id"], "api/contents/kept.txt"))
    assert r.status_code == 200 and r.json()["content"] == "hello"
    remove(live, nb["id"])


def test_the_one_time_url_logs_a_browser_in_once(live: conftest.Live) -> None:
    nb = wait(live, create(live, "browser")["id"], "RUNNING")
    browser = httpx.Client(base_url=live.url)
    assert browser.get(proxied(live, nb["id"], "api/status")).status_code == 401

    opened = browser.get(nb["url"].removeprefix(live.url))
    assert opened.status_code == 302
    assert opened.headers["location"] == f"/notebooks/{nb['id']}/lab"
    assert browser.get(proxied(live, nb["id"], "lab")).status_code == 200
    kernel = new_kernel(live, nb["id"], http=browser)
    assert run_code(live, nb["id"], kernel, "40+2", http=browser) == "42"
    other_site = browser.get(proxied(live, nb["id"], "api/status"),
                             headers={"Origin": "http://evil.example"})
    assert other_site.status_code == 403

    again = httpx.Client(base_url=live.url).get(nb["url"].removeprefix(live.url))
    assert again.status_code == 401  # spent
    remove(live, nb["id"])
    browser.close()


def test_a_short_timing_lease_stops_it_and_renewing_moves_stops_at(
        live: conftest.Live) -> None:
    nb = create(live, "short-lease", lease={"duration": 60_000, "type": "timing"})
    nb = wait(live, nb["id"], "RUNNING")
    first = nb["stops_at"]
    later = live.http.patch(path(live, f"/{nb['id']}/lease"),
                            json={"duration": 120_000, "type": "timing"}).json()
    assert later["stops_at"] > first
    assert show(live, nb["id"])["stops_at"] == later["stops_at"]

    soon = live.http.patch(path(live, f"/{nb['id']}/lease"), params={"duration": 2000})
    assert soon.status_code == 200 and soon.json()["stops_at"] < first
    stopped = wait(live, nb["id"], "STOPPED", timeout=30)
    assert stopped["stop_reason"] == "lease expired"
    events = live.http.get(path(live, f"/{nb['id']}/events")).json()["events"]
    assert "Stopping: lease expired" in [e["message"] for e in events]
    remove(live, nb["id"])


def test_an_idle_notebook_stops_but_never_while_a_kernel_is_busy(live: conftest.Live) -> None:
    nb = create(live, "idle", lease={"duration": 600_000, "type": "idle"})
    nb = wait(live, nb["id"], "RUNNING")
    kernel = new_kernel(live, nb["id"])
    run_code(live, nb["id"], kernel, "import time; time.sleep(8)", wait_result=False)
    r = live.http.patch(path(live, f"/{nb['id']}/lease"),
                        json={"duration": 2000, "type": "idle"})
    assert r.status_code == 200, r.text
    renewed = time.monotonic()
    while time.monotonic() - renewed < 5:  # busy and silent, past its idle lease
        assert show(live, nb["id"])["status"] == "RUNNING"
        time.sleep(0.2)

    # Once the kernel is done, an open tab's polling does not keep it alive.
    deadline = time.monotonic() + 40
    while (found := show(live, nb["id"]))["status"] != "STOPPED":
        assert time.monotonic() < deadline, found
        live.http.get(proxied(live, nb["id"], "api/kernels"))
        time.sleep(0.2)
    assert found["stop_reason"] == "idle for 2 s"
    remove(live, nb["id"])


def test_another_project_gets_404_and_a_viewer_can_neither_start_nor_stop(
        live: conftest.Live) -> None:
    nb = create(live, "guarded")
    outsider = live.new_user("outsider", project_id=live.new_project("elsewhere"), key=False)
    viewer = live.new_user("looker", role="viewer", key=False)

    for call in (outsider.http.get(path(live, f"/{nb['id']}")),
                 outsider.http.post(path(live, f"/{nb['id']}/stop")),
                 outsider.http.get(proxied(live, nb["id"], "api/status"))):
        assert call.status_code == 404, call.text
    seen = viewer.http.get(path(live, f"/{nb['id']}"))
    assert seen.status_code == 200 and seen.json()["token"] == ""
    assert "token=" not in seen.json()["url"]
    for call in (viewer.http.post(path(live, f"/{nb['id']}/stop")),
                 viewer.http.post(path(live, f"/{nb['id']}/start")),
                 viewer.http.get(proxied(live, nb["id"], "api/status"))):
        assert call.status_code == 403, call.text
    assert show(live, nb["id"])["status"] in ("CREATING", "RUNNING")
    remove(live, nb["id"])


class _Recorder(http.server.BaseHTTPRequestHandler):
    """A server a job runs: answers everything as a JupyterLab would, and keeps what came."""

    seen: list[str]

    def do_GET(self) -> None:
        self.seen.append(f"{self.path} {self.headers.get('Authorization')}")
        body = json.dumps({"started": "a job's", "kernels": 0}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET

    def log_message(self, *_args: Any) -> None:
        pass


@contextlib.contextmanager
def planting(live: conftest.Live, nb_id: str, port: int) -> Iterator[None]:
    """What a job of another project does: keep writing JupyterLab's server files, naming
    `port`, into every folder of the notebook's session (the run_as user's, once)."""
    stop = threading.Event()
    state = live.settings.home / "notebooks" / nb_id

    def plant() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            info = {"base_url": f"/notebooks/{nb_id}/", "port": port, "pid": 1,
                    "hostname": "127.0.0.1", "url": f"http://127.0.0.1:{port}/notebooks/"
                    f"{nb_id}/", "token": "", "sock": "", "secure": False}
            for folder in [*state.glob("session-*"), *state.glob("session-*/runtime")]:
                with contextlib.suppress(OSError):
                    (folder / f"jpserver-{90000 + n % 50}.json").write_text(json.dumps(info))
            time.sleep(0.02)

    planter = threading.Thread(target=plant, daemon=True)
    planter.start()
    try:
        yield
    finally:
        stop.set()
        planter.join()


def test_planted_server_files_neither_redirect_a_notebook_nor_keep_it_from_starting(
        live: conftest.Live) -> None:
    """A job's server files name a port: one nothing listens on (the notebook must still
    start), one where the job listens (nothing of the notebook's may reach it)."""
    dead = factories.free_port()
    nb = create(live, "planted-dead")
    with planting(live, nb["id"], dead):
        wait(live, nb["id"], "RUNNING")
        assert live.http.get(proxied(live, nb["id"], "api/kernels")).status_code == 200
    remove(live, nb["id"])

    seen: list[str] = []
    handler = type("Recorder", (_Recorder,), {"seen": seen})
    job_server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=job_server.serve_forever, daemon=True).start()
    try:
        nb = create(live, "planted-live")
        with planting(live, nb["id"], job_server.server_address[1]):
            wait(live, nb["id"], "RUNNING")
            status = live.http.get(proxied(live, nb["id"], "api/status"))
            kernel = new_kernel(live, nb["id"])
            assert run_code(live, nb["id"], kernel, "6*7") == "42"
        assert status.status_code == 200 and status.json()["started"] != "a job's"
        assert seen == []  # not the controller's look, nor a user's request
        remove(live, nb["id"])
    finally:
        job_server.shutdown()
        job_server.server_close()


def test_jupyterlab_s_pages_carry_no_credential_of_its_own(live: conftest.Live) -> None:
    nb = wait(live, create(live, "no-token")["id"], "RUNNING")
    page = live.http.get(proxied(live, nb["id"], "lab"))
    assert page.status_code == 200
    found = re.search(r'<script id="jupyter-config-data" type="application/json">(.*?)</script>',
                      page.text, re.S)
    assert found, page.text[:2000]
    config = json.loads(found.group(1))
    assert config["token"] == ""
    for rest in ("lab/api/settings", "api/me", "lab/api/workspaces", "api/status"):
        r = live.http.get(proxied(live, nb["id"], rest))
        assert r.status_code == 200, (rest, r.text)
        assert '"token": "' not in r.text.replace('"token": ""', ""), rest
        # corral's server dates and names the answer: JupyterLab's Date and Server (its
        # software and version) are not passed on as a second of each.
        assert len(r.headers.get_list("date")) == 1, (rest, r.headers)
        assert r.headers.get_list("server") == ["uvicorn"], (rest, r.headers)
    plain = live.http.get(proxied(live, nb["id"], "lab"), headers={"Accept-Encoding": "identity"})
    assert plain.status_code == 200 and "content-encoding" not in plain.headers
    # Its address there is the notebooks' own origin, never the API's and console's.
    assert nb["url"].startswith(live.embedded.notebook_url + "/")
    on_api = httpx.get(f"{live.url}/notebooks/{nb['id']}/api/status",
                       headers={"X-Auth-Token": live.login.token or ""})
    assert on_api.status_code == 307
    assert on_api.headers["location"] == proxied(live, nb["id"], "api/status")
    remove(live, nb["id"])


def test_a_notebook_asks_for_what_exists(live: conftest.Live) -> None:
    bad_flavor = live.http.post(path(live), json={"name": "x", "flavor": "no.such"})
    bad_image = live.http.post(path(live), json={"name": "x", "flavor": FLAVOR,
                                                 "image_id": "no-such-engine"})
    outside = live.http.post(path(live), json={
        "name": "x", "flavor": FLAVOR,
        "volume": {"category": "EFS", "ownership": "DEDICATED",
                   "uri": str(live.settings.home / "runs")}})
    assert [r.status_code for r in (bad_flavor, bad_image, outside)] == [400, 400, 400]
    assert live.http.get(path(live), params={"name": "x"}).json()["total"] == 0
    flavors = live.http.get(path(live, "/flavors")).json()
    assert FLAVOR in [f["id"] for f in flavors["flavors"]]
    assert flavors["total"] == len(flavors["data"])


def test_the_cli_creates_opens_extends_stops_and_deletes_a_notebook(
        live: conftest.Live) -> None:
    from tests.api.test_cli import corral

    made = corral(live, "notebook", "create", "cli-notebook", "--flavor", FLAVOR,
                  "--lease", "1h")
    assert made.exit_code == 0, made.output
    nb_id = made.stdout.strip()
    wait(live, nb_id, "RUNNING")
    listed = corral(live, "notebook", "list")
    assert "cli-notebook" in listed.stdout and "RUNNING" in listed.stdout
    opened = corral(live, "notebook", "open", "cli-notebook")
    assert opened.exit_code == 0 and "/lab?token=" in opened.stdout
    before = show(live, nb_id)["stops_at"]
    extended = corral(live, "notebook", "extend", "cli-notebook", "2h")
    assert extended.exit_code == 0, extended.output
    assert show(live, nb_id)["stops_at"] >= before + 2 * 3600 * 1000 - 5000
    bad = corral(live, "notebook", "extend", "cli-notebook", "soon")
    assert bad.exit_code == 2

    assert corral(live, "notebook", "stop", nb_id).exit_code == 0
    wait(live, nb_id, "STOPPED")
    assert "stopped by admin" in corral(live, "notebook", "show", nb_id).stdout
    assert corral(live, "notebook", "delete", "cli-notebook").exit_code == 0
    test_sdk.poll(lambda: live.http.get(path(live, f"/{nb_id}")).status_code == 404, 60,
                  "the CLI's notebook is gone")
