"""Run the TensorBoard example in one command, on a corral server of its own:

    python examples/tensorboard/run.py [--home DIR]

It submits job.yaml (train.py fits a line and writes `loss` and `slope` for TensorBoard
into CORRAL_SUMMARY_DIR), and while it runs opens its TensorBoard as a browser does: the
page is refused without logging in (401); the link `corral show` prints (the job's
`endpoints.tensorboard`) logs the browser in (a cookie); TensorBoard, started by the
server on that first request, answers through corral's proxy with the steps written so
far, and once the job has ended with all of them. TensorBoard comes with the
`tensorboard` extra (`pip install -e '.[tensorboard]'`). About 10 s on two cores. Exits
with 0 when all went so.
"""

from __future__ import annotations

import json
import pathlib
import re
import sys

import httpx
import yaml

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # examples/runner.py
import runner

HERE = pathlib.Path(__file__).resolve().parent


def job_file(work: pathlib.Path) -> pathlib.Path:
    """job.yaml with its code here and its output (and summaries) in `work`."""
    body = yaml.safe_load((HERE / "job.yaml").read_text())
    body["algorithm"]["code_dir"] = str(HERE)
    body["algorithm"]["outputs"][0]["remote"]["obs"]["obs_url"] = str(work / "output")
    body["algorithm"]["summary"]["log_dir"]["pfs"]["pfs_path"] = str(work / "output" / "tb")
    path = work / "job.json"
    path.write_text(json.dumps(body))
    return path


def main() -> int:
    with runner.session(sys.argv[1:], __doc__.splitlines()[0]) as s:
        said = s.output("submit", str(job_file(s.work)))
        job_id = re.search(r" as (\S+) \(", said)
        if job_id is None:
            return 1
        runner.wait("the job to run", lambda: s.api.get_job(job_id[1])["status"]["phase"]
                    in ("Running", "Completed", "Failed"))
        s.corral("show", job_id[1])  # its `tensorboard` row: the link, from the job's body
        board = s.api.get_job(job_id[1]).get("endpoints", {}).get("tensorboard")
        if not board:
            raise SystemExit("the job has no TensorBoard link")
        page = httpx.URL(f"{board['url']}?token={board['token']}")
        origin = f"{page.scheme}://{page.netloc.decode()}"
        refused = httpx.get(f"{origin}{page.path}data/plugin/scalars/tags", timeout=30)
        say(f"a browser that has not opened the link is refused: {refused.status_code} "
            f"{refused.json().get('error_msg')}")
        with httpx.Client(base_url=origin, follow_redirects=True, timeout=120) as browser:
            opened = browser.get(str(page))
            cookie = "set" if browser.cookies.get("corral-tensorboard") else "NOT set"
            say(f"opened the link: {opened.status_code} {opened.url.path} (TensorBoard's "
                f"page); corral's cookie corral-tensorboard {cookie}")
            say(f"while it runs: {steps(browser, page.path)} steps of loss so far")
            if s.corral("logs", "-f", job_id[1]) != 0:
                return 1
            seen = runner.wait("TensorBoard to show the last step",
                               lambda: (n := steps(browser, page.path)) >= 60 and n)
            points = browser.get(f"{page.path}data/plugin/scalars/scalars",
                                 params={"run": ".", "tag": "loss"}).json()
            say(f"after it ended: {seen} steps; loss {points[0][2]:.3f} at step 0, "
                f"{points[-1][2]:.4f} at step {points[-1][1]}")
    return 0


def steps(browser: httpx.Client, path: str) -> int:
    """How many steps of `loss` TensorBoard shows (0 before the first is written)."""
    r = browser.get(f"{path}data/plugin/scalars/scalars", params={"run": ".", "tag": "loss"})
    return len(r.json()) if r.status_code == 200 else 0


def say(text: str) -> None:
    print(f"# {text}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
