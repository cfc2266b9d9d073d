"""Run the notebook example in one command, on a corral server of its own:

    python examples/notebooks/run.py [--home DIR]

It creates a notebook (JupyterLab, on one CPU, stopping after 5 minutes with nothing
happening), waits until it runs, and opens it as a browser does: the one-time URL of
`corral notebook open` logs the browser in (a cookie), and JupyterLab answers through
corral's proxy, where it writes a file into the workspace. Then it stops the notebook,
starts it again (a new session, a new URL), finds the file still there, and deletes the
notebook. JupyterLab comes with the `notebook` extra (`pip install -e '.[notebook]'`).
Under a minute on two cores. Exits with 0 when all went so.
"""

from __future__ import annotations

import pathlib
import sys
from typing import Any

import httpx

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # examples/runner.py
import runner

from corral.sdk import client, notebooks

NAME = "explore"
FILE = "hello.py"
TEXT = "print('written through corral, kept across sessions')\n"
FAILED = {"CREATE_FAILED", "START_FAILED", "ERROR"}


def main() -> int:
    with runner.session(sys.argv[1:], __doc__.splitlines()[0]) as s:
        api = notebooks.Notebooks(s.api)
        nb_id = s.output("notebook", "create", NAME, "--flavor", "corral.cpu.1u",
                         "--idle", "5m").split()[-1]
        running(api, nb_id)
        s.corral("notebook", "list")
        browser = write_a_file(s, nb_id)

        s.corral("notebook", "stop", NAME)
        stopped = wait_for(api, nb_id, "STOPPED")
        workspace = pathlib.Path(stopped["volume"]["mount_path"])
        say(f"stopped ({stopped.get('stop_reason')}); its workspace {workspace} holds "
            f"{sorted(p.name for p in workspace.iterdir() if not p.name.startswith('.'))}")

        s.corral("notebook", "start", NAME)
        running(api, nb_id)
        find_the_file(s, nb_id, browser)

        s.corral("notebook", "delete", NAME)
        runner.wait(f"notebook {nb_id} to be gone", lambda: gone(api, nb_id))
        s.corral("notebook", "list")
    return 0


def write_a_file(s: runner.Session, nb_id: str) -> httpx.Client:
    """The first session: refused before logging in, then JupyterLab's status and a file
    written through the proxy. The browser that did it."""
    refused = httpx.get(f"{notebooks_origin(s)}/notebooks/{nb_id}/api/status")
    say(f"a browser that has not opened its URL is refused: {refused.status_code} "
        f"{refused.json().get('error_msg')}")
    browser = open_in_browser(s, nb_id)
    status = browser.get(f"/notebooks/{nb_id}/api/status")
    say(f"GET /notebooks/{nb_id}/api/status -> {status.status_code} {status.json()}")
    put = browser.put(f"/notebooks/{nb_id}/api/contents/{FILE}",
                      json={"type": "file", "format": "text", "content": TEXT})
    say(f"PUT /notebooks/{nb_id}/api/contents/{FILE} -> {put.status_code}")
    if put.status_code != 201:
        raise SystemExit(f"JupyterLab did not write {FILE}: {put.text}")
    return browser


def find_the_file(s: runner.Session, nb_id: str, first: httpx.Client) -> None:
    """The second session: a new login (the first browser's no longer works), and the
    file written in the first."""
    browser = open_in_browser(s, nb_id)
    stale = first.get(f"/notebooks/{nb_id}/api/status")
    say(f"the first browser's cookie was for the first session only: {stale.status_code}")
    kept = browser.get(f"/notebooks/{nb_id}/api/contents/{FILE}")
    content = kept.json().get("content") if kept.status_code == 200 else None
    say(f"GET /notebooks/{nb_id}/api/contents/{FILE} -> {kept.status_code}: {content!r}")
    if content != TEXT:
        raise SystemExit(f"{FILE} did not survive the restart")
    say(f"{FILE} survived the restart")


def open_in_browser(s: runner.Session, nb_id: str) -> httpx.Client:
    """A browser of its own that opened the notebook's one-time URL: logged in to it."""
    url = s.output("notebook", "open", NAME).split()[-1]
    # On the notebooks' own port: a browser origin apart from the console's.
    browser = httpx.Client(base_url=notebooks_origin(s), follow_redirects=True, timeout=30)
    page = browser.get(url)
    cookie = "set" if browser.cookies.get("corral-notebook") else "NOT set"
    say(f"opened it: {page.status_code} {page.url.path} (JupyterLab's page, "
        f"{len(page.text)} characters); corral's cookie corral-notebook {cookie}")
    return browser


def notebooks_origin(s: runner.Session) -> str:
    """Where notebooks are served: the scheme, host and port of a notebook's URL."""
    url = httpx.URL(s.output("notebook", "open", NAME).split()[-1])
    return f"{url.scheme}://{url.netloc.decode()}"


def running(api: notebooks.Notebooks, nb_id: str) -> dict[str, Any]:
    say("waiting for its JupyterLab to answer ...")
    return wait_for(api, nb_id, "RUNNING")


def wait_for(api: notebooks.Notebooks, nb_id: str, status: str) -> dict[str, Any]:
    def reached() -> dict[str, Any] | None:
        nb = api.get(nb_id)
        if nb["status"] in FAILED:
            raise SystemExit(f"notebook {nb_id} is {nb['status']}: {nb.get('fail_reason')}")
        return nb if nb["status"] == status else None

    return runner.wait(f"notebook {nb_id} to be {status}", reached)


def gone(api: notebooks.Notebooks, nb_id: str) -> bool:
    try:
        api.get(nb_id)
    except client.ClientError as exc:
        return exc.status == 404
    return False


def say(text: str) -> None:
    print(f"# {text}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
