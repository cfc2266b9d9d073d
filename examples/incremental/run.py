"""Run the incremental-learning example on its own: three rounds as the data drifts.

    python examples/incremental/run.py

It starts a corral server in this process (in a fresh folder; `--workdir` to choose it),
trains a first model on points split by a line at 0 degrees, and makes the loop of
loop.yaml watch a dataset. Then it streams three batches:

1. points split at 60 degrees: the new model beats the current one by far: promoted, and
   the service reloads it;
2. more of the same: the new model is no better by 5 points: rejected;
3. many points split at 120 degrees: promoted, and reloaded.

It prints each round as it ends, the rounds table of `corral il show`, and the service's
log with its reloads. About half a minute on two cores.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import tempfile
import time
from typing import Any

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import stream  # noqa: E402  (beside this file)

from corral import server  # noqa: E402
from corral import settings as settings_mod  # noqa: E402
from corral.cli import il, jobfile, render  # noqa: E402
from corral.sdk import client, credentials, incremental  # noqa: E402

#: (angle, samples, seed) of each batch the stream brings
BATCHES = [(60.0, 250, 2), (60.0, 250, 3), (120.0, 1000, 4)]
ENDED = {"Promoted", "Rejected", "Failed", "Stopped"}


def wait(what: str, check: Any, timeout: float = 120) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.2)
    raise SystemExit(f"gave up waiting for {what}")


def first_model(api: client.Client, work: pathlib.Path) -> None:
    """drift-model v1: trained by an ordinary job on points split at 0 degrees."""
    data = work / "initial.csv"
    data.write_text("\n".join([stream.HEADER, *stream.points(0.0, 400, 1)]) + "\n")
    body = jobfile.load_job_file(HERE / "initial-job.yaml")
    body["algorithm"]["inputs"][0]["remote"]["obs"]["obs_url"] = str(data)
    body["algorithm"]["outputs"][0]["remote"]["obs"]["obs_url"] = str(work / "initial-model")
    job = api.create_job(body)
    ended = wait("the first model's job", lambda: (
        j := api.get_job(job["metadata"]["id"]))["status"]["phase"] in client.TERMINAL and j)
    if ended["status"]["phase"] != "Completed":
        raise SystemExit(f"the first model's job ended {ended['status']['phase']}")
    wait("the first model", lambda: _exists(api, "drift-model"))


def _exists(api: client.Client, name: str) -> bool:
    try:
        return bool(api.model(name)["versions"])
    except client.ClientError:
        return False


def rounds(api: client.Client) -> list[dict[str, Any]]:
    return list(incremental.loop(api, "drift")["status"]["rounds"])


def say(r: dict[str, Any]) -> None:
    new, cur = r["metrics"]["new"], r["metrics"]["current"]
    acc = (f"accuracy {new.get('accuracy', 0):.3f} (new) vs {cur.get('accuracy', 0):.3f} "
           "(current)" if new else "")
    deploy = r.get("deploy") or {}
    print(f"round {r['number']}: {r['state']}: {acc}; {r.get('rule') or r.get('message')}"
          + (f"; deploy {deploy.get('model')} {deploy.get('state')}" if deploy else ""),
          flush=True)


def run(api: client.Client, work: pathlib.Path) -> None:
    print("training the first model (points split at 0 degrees) ...", flush=True)
    first_model(api, work)
    data = work / "stream.csv"
    data.write_text(stream.HEADER + "\n")
    incremental.create_dataset(api, "drift-stream", str(data))
    body = il.load(HERE / "loop.yaml")
    body["spec"]["outputDir"] = str(work / "output")
    incremental.create(api, body)
    wait("the service to load the first model", lambda: any(
        d["state"] == "Loaded" for d in incremental.loop(api, "drift")["status"]["deploys"]))
    for number, (angle, count, seed) in enumerate(BATCHES, 1):
        print(f"streaming {count} points split at {angle:g} degrees ...", flush=True)
        incremental.append(api, "drift-stream", stream.points(angle, count, seed))
        say(wait(f"round {number}", lambda n=number: (
            (found := rounds(api)) and len(found) >= n and found[n - 1]["state"] in ENDED
            and found[n - 1])))
    render.console().print(il.rounds_table(rounds(api)))
    service = incremental.loop(api, "drift")["status"]["service"]
    log = api.log_chunk(service["job_id"], "worker-0", 0)["content"]
    print(f"\nthe service's log ({service['job_name']}):")
    print("".join(f"  {line}\n" for line in log.splitlines()), end="")
    # The service runs until the loop stops: stopped here, it does not outlive the example.
    incremental.act(api, "drift", "stop", reason="the example is over")
    wait("the service to stop", lambda: api.get_job(service["job_id"])["status"]["phase"]
         in {"Terminated", "Completed", "Failed", "Abnormal"})
    print("\nthe loop is stopped, and its service with it (`corral il resume drift` on this "
          "home starts them again)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=pathlib.Path,
                        help="where the server and the example keep their files (default: "
                             "a new temporary folder, removed at the end)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="corral-incremental-") as tmp:
        work = (args.workdir or pathlib.Path(tmp)).absolute()
        work.mkdir(parents=True, exist_ok=True)
        settings = settings_mod.Settings(home=work / "home", tick_interval=0.5,
                                         storage_interval=0.5)
        embedded = server.start_embedded(settings)
        try:
            login = credentials.read(settings.credentials_file)
            assert login is not None
            with client.Client(embedded.url, login.project_id, token=login.token) as api:
                run(api, work)
        finally:
            embedded.stop()


if __name__ == "__main__":
    main()
