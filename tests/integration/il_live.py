"""Incremental-learning loops against a running server, with tiny real worker scripts.

The workers are Sedna-style: they read the environment the loop gives them. A sample is a
number; the model a train job writes is the mean of its samples (its "accuracy"), so a
test decides each round's verdict with the samples it appends. `SHARED` (outside corral)
is where workers note that they ran, and where a test holds a stage: a file
`hold-<stage>` there keeps that stage's worker waiting until it is removed.
"""

from __future__ import annotations

import json
import pathlib
import time
from typing import Any

import httpx

from tests import factories

TRAIN = """
import json, os, pathlib, sys, time
shared = pathlib.Path(os.environ["SHARED"])
with open(shared / "runs", "a") as fh:
    fh.write(f"train {os.environ['IL_ROUND']} {os.getpid()}\\n")
while (shared / "hold-train").exists():
    time.sleep(0.05)
lines = [x.strip() for x in open(os.environ["TRAIN_DATASET_URL"]) if x.strip()]
if "fail" in lines:
    sys.exit(3)
values = [float(x) for x in lines]
out = pathlib.Path(os.environ["MODEL_URL"])
out.mkdir(parents=True, exist_ok=True)
(out / "model.json").write_text(json.dumps({
    "accuracy": sum(values) / len(values), "round": int(os.environ["IL_ROUND"]),
    "base": os.environ["BASE_MODEL_URL"]}))
"""

EVAL = """
import json, os, pathlib, time
shared = pathlib.Path(os.environ["SHARED"])
with open(shared / "runs", "a") as fh:
    fh.write(f"eval {os.environ['IL_ROUND']} {os.getpid()}\\n")
while (shared / "hold-eval").exists():
    time.sleep(0.05)
metrics = {}
for i, url in enumerate(os.environ["MODEL_URLS"].split(";")):
    model = json.loads((pathlib.Path(url) / "model.json").read_text())
    metrics[f"{i}/accuracy"] = model["accuracy"]
print("corral:metrics " + json.dumps(metrics), flush=True)
"""

SERVE = """
import json, os, pathlib, time
shared = pathlib.Path(os.environ["SHARED"])
with open(shared / "runs", "a") as fh:
    fh.write(f"serve 0 {os.getpid()}\\n")
config = pathlib.Path(os.environ["MODEL_HOT_UPDATE_CONFIG"])
ack = pathlib.Path(os.environ["MODEL_HOT_UPDATE_ACK"])
seen = None
while True:
    try:
        conf = json.loads(config.read_text())["model_config"]
    except (OSError, ValueError, KeyError):
        conf = None
    if conf and conf["model_update_time"] != seen and not (shared / "hold-ack").exists():
        model = json.loads((pathlib.Path(conf["model_path"]) / "model.json").read_text())
        seen = conf["model_update_time"]
        print(f"reloaded {conf['model_path']} accuracy={model['accuracy']}", flush=True)
        tmp = ack.with_name(ack.name + ".tmp")
        tmp.write_text(json.dumps({"model_update_time": seen, "status": "loaded"}))
        tmp.replace(ack)
    time.sleep(0.1)
"""

INITIAL = """
import json, os, pathlib, sys
out = pathlib.Path(sys.argv[1].split("=", 1)[1])
out.mkdir(parents=True, exist_ok=True)
(out / "model.json").write_text(json.dumps({"accuracy": float(os.environ["ACCURACY"])}))
"""

TERMINAL = {"Completed", "Failed", "Terminated", "Abnormal"}


class IL:
    """A client of one project's loops and datasets, and a folder for their files."""

    def __init__(self, http: httpx.Client, project_id: str, root: pathlib.Path) -> None:
        self.http, self.project_id, self.root = http, project_id, root
        self.shared = root / "shared"
        self.shared.mkdir(parents=True, exist_ok=True)
        self.code = root / "code"
        self.code.mkdir(exist_ok=True)
        for name, source in (("train.py", TRAIN), ("eval.py", EVAL), ("serve.py", SERVE),
                             ("initial.py", INITIAL)):
            (self.code / name).write_text(source)

    def path(self, rest: str) -> str:
        return f"/v2/{self.project_id}{rest}"

    def ok(self, method: str, rest: str, status: int = 200, **kw: Any) -> Any:
        r = self.http.request(method, self.path(rest), **kw)
        assert r.status_code == status, r.text
        return r.json()

    # --- what a loop needs ------------------------------------------------------------

    def dataset(self, name: str = "stream", lines: list[str] | None = None) -> dict[str, Any]:
        path = self.root / f"{name}.txt"
        path.write_text("".join(f"{x}\n" for x in lines or []))
        return dict(self.ok("POST", "/datasets", 201, json={"name": name, "url": str(path)}))

    def append(self, lines: list[str], name: str = "stream") -> dict[str, Any]:
        return dict(self.ok("POST", f"/datasets/{name}/samples", json={"samples": lines}))

    def initial_model(self, name: str = "m", accuracy: float = 0.5) -> None:
        """Version 1 of model `name`, registered by a job that wrote it."""
        body = factories.make_job(name=f"make-{name}", code_dir=self.code,
                                  boot_file="initial.py",
                                  outputs={"train_url": str(self.root / f"{name}-v1")},
                                  environments={"ACCURACY": str(accuracy)})
        body["metadata"]["annotations"] = {"corral/model-name": name}
        job = self.ok("POST", "/training-jobs", 201, json=body)
        factories.wait_for(lambda: self.ok("GET", f"/training-jobs/{job['metadata']['id']}")[
            "status"]["phase"] in TERMINAL, 30, "the initial model's job")
        factories.wait_for(lambda: self.http.get(self.path(f"/models/{name}")).status_code
                           == 200, 30, "the initial model")

    def template(self, boot: str, **env: str) -> dict[str, Any]:
        return {"algorithm": {"code_dir": str(self.code), "boot_file": boot,
                              "environments": {"SHARED": str(self.shared), **env}},
                "spec": {"resource": {"flavor_id": "corral.cpu.1u"}}}

    def spec(self, *, hot: bool = True, serve: bool = True, threshold: float = 0.0,
             samples: int = 2, period: int = 1, **over: Any) -> dict[str, Any]:
        """Train when `samples` new training samples wait (checked every `period` s);
        promote when the new model's accuracy beats the current one's by `threshold`."""
        deploy: dict[str, Any] = {
            "model": {"name": "m", "hotUpdateEnabled": hot, "pollPeriodSeconds": 1,
                      "ackTimeoutSeconds": 30},
            "trigger": {"condition": {"operator": ">", "threshold": threshold,
                                      "metric": "accuracy_delta"}}}
        if serve:
            deploy["template"] = self.template("serve.py")
        out: dict[str, Any] = {
            "dataset": {"name": "stream", "trainProb": 0.5},
            "initialModel": {"name": "m"},
            "trainSpec": {"template": self.template("train.py"), "trigger": {
                "checkPeriodSeconds": period, "condition": {
                    "operator": ">=", "threshold": samples, "metric": "num_of_samples"}}},
            "evalSpec": {"template": self.template("eval.py")},
            "deploySpec": deploy,
            "outputDir": str(self.root / "out"),
        }
        out.update(over)
        return out

    def create(self, spec: dict[str, Any], name: str = "loop") -> dict[str, Any]:
        return dict(self.ok("POST", "/incremental-learning-jobs", 201,
                            json={"metadata": {"name": name}, "spec": spec}))

    def show(self, name: str = "loop") -> dict[str, Any]:
        return dict(self.ok("GET", f"/incremental-learning-jobs/{name}"))

    def act(self, action: str, name: str = "loop", status: int = 202, **kw: Any) -> Any:
        return self.ok("POST", f"/incremental-learning-jobs/{name}/actions", status,
                       json={"action": action, **kw})

    def rounds(self, name: str = "loop") -> list[dict[str, Any]]:
        return list(self.show(name)["status"]["rounds"])

    def wait_round(self, number: int, states: set[str], name: str = "loop",
                   timeout: float = 60) -> dict[str, Any]:
        def ended() -> dict[str, Any] | None:
            found = self.rounds(name)
            if len(found) >= number and found[number - 1]["state"] in states:
                return found[number - 1]
            return None
        return dict(factories.wait_for(ended, timeout, f"round {number} to be {states}"))

    def wait_state(self, state: str, name: str = "loop", timeout: float = 60
                   ) -> dict[str, Any]:
        return dict(factories.wait_for(
            lambda: (s := self.show(name))["status"]["state"] == state and s, timeout,
            f"the loop to be {state}"))

    def runs(self) -> list[tuple[str, int, int]]:
        """(stage, round, pid) of every worker that started."""
        path = self.shared / "runs"
        if not path.exists():
            return []
        out = []
        for line in path.read_text().splitlines():
            stage, number, pid = line.split()
            out.append((stage, int(number), int(pid)))
        return out

    def service_log(self, name: str = "loop") -> str:
        job = self.show(name)["status"]["service"]
        if not job:
            return ""
        r = self.http.get(self.path(f"/training-jobs/{job['job_id']}/tasks/worker-0/logs"))
        return str(r.json().get("content", "")) if r.status_code == 200 else ""

    def service_log_with(self, text: str, name: str = "loop") -> str:
        """The service's log once it holds `text`: the service acknowledges a model before
        its keeper has written the line it printed, a moment later."""
        factories.wait_for(lambda: text in self.service_log(name), timeout=30,
                           what=f"the service's log to show {text!r}")
        return self.service_log(name)

    def alias(self, model: str = "m") -> dict[str, Any]:
        return dict(self.ok("GET", f"/models/{model}/aliases/production/history"))


def wait(seconds: float) -> None:
    time.sleep(seconds)


def jsonl(value: Any) -> str:
    return json.dumps(value)
