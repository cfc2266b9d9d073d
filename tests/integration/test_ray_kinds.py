"""Loops and pipelines on a real local Ray cluster (test_ray.py's: a head and two workers),
with a real S3 API on loopback (tests/s3.py) where object storage carries their data.

Nodes of a simulated cluster share the host's file system, so each worker prints the
paths it was given and the node it ran on, and the tests check that those are its node's
own copies (never the server's folders) and which node it was.
"""

from __future__ import annotations

import contextlib
import pathlib
from collections.abc import Iterator
from typing import Any

import pytest

from corral.executors.ray import nodes
from tests import factories
from tests import s3 as s3_mod
from tests.conftest import Live, start_live, stop_live
from tests.integration import il_live
from tests.integration.test_ray import FLAVORS, RayCluster, env_of, log_of

pytestmark = [pytest.mark.ray, pytest.mark.timeout(300)]

#: half a core: the loop's three jobs, or a pipeline's tasks, fit beside each other
SMALL = {"flavor_id": "corral.cpu.1u", "cpu": 0.5, "memory_gb": 1}

#: what every worker says first: its node and the paths it was given
WHERE = """
import json, os, pathlib, sys
print("NODE=" + os.environ["CORRAL_RAY_NODE_ID"])
for key in ("TRAIN_DATASET_URL", "BASE_MODEL_URL", "MODEL_URL", "MODEL_URLS",
            "TEST_DATASET_URL", "MODEL_HOT_UPDATE_CONFIG", "MODEL_HOT_UPDATE_ACK"):
    print(f"{key}={os.environ.get(key, '')}")
"""

TRAIN = WHERE + """
lines = [x.strip() for x in open(os.environ["TRAIN_DATASET_URL"]) if x.strip()]
values = [float(x) for x in lines]
base = pathlib.Path(os.environ["BASE_MODEL_URL"]) / "model.json"
out = pathlib.Path(os.environ["MODEL_URL"])
out.mkdir(parents=True, exist_ok=True)
(out / "model.json").write_text(json.dumps({
    "accuracy": sum(values) / len(values), "base": json.loads(base.read_text())}))
"""

EVAL = WHERE + """
metrics = {}
for i, url in enumerate(os.environ["MODEL_URLS"].split(";")):
    model = json.loads((pathlib.Path(url) / "model.json").read_text())
    metrics[f"{i}/accuracy"] = model["accuracy"]
print("corral:metrics " + json.dumps(metrics), flush=True)
"""

SERVE = WHERE + """
import time
config = pathlib.Path(os.environ["MODEL_HOT_UPDATE_CONFIG"])
ack = pathlib.Path(os.environ["MODEL_HOT_UPDATE_ACK"])
seen = None
while True:
    try:
        conf = json.loads(config.read_text())["model_config"]
    except (OSError, ValueError, KeyError):
        conf = None
    if conf and conf["model_update_time"] != seen:
        model = json.loads((pathlib.Path(conf["model_path"]) / "model.json").read_text())
        seen = conf["model_update_time"]
        print(f"reloaded {conf['model_path']} accuracy={model['accuracy']}", flush=True)
        tmp = ack.with_name(ack.name + ".tmp")
        tmp.write_text(json.dumps({"model_update_time": seen, "status": "loaded"}))
        tmp.replace(ack)
    time.sleep(0.2)
"""


@pytest.fixture(scope="module")
def cluster() -> Iterator[RayCluster]:
    c = RayCluster()
    yield c
    c.shutdown()


@pytest.fixture(scope="module")
def store() -> Iterator[s3_mod.S3]:
    s = s3_mod.start()
    yield s
    s.stop()


def node_pool(name: str, node: Any) -> dict[str, Any]:
    """A pool of the cluster holding one node only (corral's node patterns)."""
    return {"pool_id": name, "nodes": [f"ray-{node.node_id[:12]}*"]}


def start(home: pathlib.Path, c: RayCluster, store: s3_mod.S3) -> Live:
    return start_live(home, ray_address=c.address, flavors=[*FLAVORS, SMALL],
                      metrics_interval=0.5, s3=store.config,
                      pools=[{"pool_id": "default"}, node_pool("cpu", c.cpu_node),
                             node_pool("edge", c.gpu_node)])


@pytest.fixture
def live(tmp_path: pathlib.Path, cluster: RayCluster, store: s3_mod.S3) -> Iterator[Live]:
    lv = start(tmp_path / "home", cluster, store)
    yield lv
    stop_live(lv)


def off_server(env: dict[str, str], root: pathlib.Path, *keys: str) -> None:
    """Each path the worker was given is its node's copy, not the server's."""
    for key in keys:
        for path in env[key].split(";"):
            assert path and not path.startswith(str(root)), (key, env[key])


def in_pool(template: dict[str, Any], pool_id: str) -> dict[str, Any]:
    template["spec"]["resource"]["pool_id"] = pool_id
    return template


def test_a_loop_trains_and_evaluates_on_the_cluster_and_its_service_on_the_node_it_is_pinned_to(
        live: Live, cluster: RayCluster, tmp_path: pathlib.Path) -> None:
    il = il_live.IL(live.http, live.project_id, tmp_path / "il")
    for name, source in (("train.py", TRAIN), ("eval.py", EVAL), ("serve.py", SERVE)):
        (il.code / name).write_text(source)
    il.dataset()
    il.initial_model(accuracy=0.25)
    spec = il.spec(threshold=0.0, samples=2)
    spec["trainSpec"]["template"] = in_pool(spec["trainSpec"]["template"], "cpu")
    spec["deploySpec"]["template"] = in_pool(spec["deploySpec"]["template"], "edge")
    il.create(spec)
    try:
        on_the_edge(live, il, cluster, tmp_path)
    finally:
        ended_service(il)


def on_the_edge(live: Live, il: il_live.IL, cluster: RayCluster,
                tmp_path: pathlib.Path) -> None:
    il.service_log_with("reloaded")
    il.append(["0.9", "0.9", "0.9", "0.9"])
    done = il.wait_round(1, {"Promoted", "Failed", "Rejected"}, timeout=120)
    assert done["state"] == "Promoted", done
    shown = il.show()
    train = env_of(log_of(live, done["train_job_id"]))
    evaluation = env_of(log_of(live, done["eval_job_id"]))
    serve = env_of(il.service_log_with("accuracy=0.9"))
    assert train["NODE"] == cluster.cpu_node.node_id
    assert serve["NODE"] == cluster.gpu_node.node_id
    off_server(train, tmp_path, "TRAIN_DATASET_URL", "BASE_MODEL_URL", "MODEL_URL")
    off_server(evaluation, tmp_path, "MODEL_URLS", "TEST_DATASET_URL")
    # Its acknowledgement is written in its node's copy of its output channel and copied
    # back; model_config.json and the models it reads are its node's copy of the deploy
    # folder, which it follows: each model deployed reaches it there.
    off_server(serve, tmp_path, "MODEL_HOT_UPDATE_ACK", "MODEL_HOT_UPDATE_CONFIG", "MODEL_URL")
    off_server({"reloaded": reloaded(il)}, tmp_path, "reloaded")
    assert shown["status"]["model"]["version"] == 2


def reloaded(il: il_live.IL) -> str:
    """The models the service loaded, as it names them (';' between them)."""
    return ";".join(line.split()[1] for line in il.service_log().splitlines()
                    if line.startswith("reloaded "))


#: a pipeline's task: its node and arguments, then each input's files read into its output
STEP = """
import os, pathlib, sys
args = dict(a[2:].split("=", 1) for a in sys.argv[1:])
print("NODE=" + os.environ["CORRAL_RAY_NODE_ID"])
text = os.environ["STEP"]
for name in ("in_data",):
    if name in args:
        print(f"IN={args[name]}")
        text = (pathlib.Path(args[name]) / "value.txt").read_text() + ";" + text
out = pathlib.Path(args["out_data"])
print(f"OUT={out}")
(out / "value.txt").write_text(text)
"""


def step(name: str, code: pathlib.Path, pool_id: str, **more: Any) -> dict[str, Any]:
    alg: dict[str, Any] = {"code_dir": str(code), "boot_file": "step.py",
                           "environments": {"STEP": name}, "outputs": [{"name": "out_data"}]}
    if "after" in more:
        alg["inputs"] = [{"name": "in_data", "from": f"{more['after']}.outputs.out_data"}]
    return {"name": name, "depends_on": [more["after"]] if "after" in more else [],
            "algorithm": alg,
            "spec": {"resource": {"flavor_id": "corral.cpu.1u", "pool_id": pool_id}}}


def test_a_pipeline_on_the_cluster_passes_data_between_nodes_through_object_storage(
        live: Live, cluster: RayCluster, store: s3_mod.S3, tmp_path: pathlib.Path) -> None:
    code = tmp_path / "code"
    code.mkdir()
    (code / "step.py").write_text(STEP)
    bucket = store.bucket()
    body = {"kind": "pipeline", "metadata": {"name": "spread"},
            "output_root": f"s3://{bucket}/pipes",
            "tasks": [step("prepare", code, "cpu"), step("train", code, "edge", after="prepare"),
                      step("check", code, "cpu", after="train")],
            "model": {"task": "check", "channel": "out_data", "name": "spread-model"}}
    r = live.http.post(live.path("/pipelines"), json=body)
    assert r.status_code == 201, r.text
    pid = r.json()["id"]

    def ended() -> dict[str, Any] | None:
        shown = live.http.get(live.path(f"/pipelines/{pid}")).json()
        return shown if shown["status"]["state"] != "running" else None

    shown = factories.wait_for(ended, timeout=180, what="the pipeline to end")
    runs = {t["task"]: t for t in shown["tasks"]}
    assert shown["status"]["state"] == "success", (shown["status"], runs)
    envs = {name: env_of(log_of(live, run["job_id"])) for name, run in runs.items()}
    assert envs["prepare"]["NODE"] == envs["check"]["NODE"] == cluster.cpu_node.node_id
    assert envs["train"]["NODE"] == cluster.gpu_node.node_id
    for env in envs.values():  # each read and wrote its node's copies
        off_server(env, tmp_path, *(k for k in ("IN", "OUT") if k in env))
    # Each task's output went to object storage, and the next task's input came from there.
    for name in ("prepare", "train", "check"):
        url = runs[name]["outputs"]["out_data"]
        assert url.startswith(f"s3://{bucket}/pipes/"), url
        assert runs.get(name, {}).get("inputs", {}) == (
            {} if name == "prepare" else
            {"in_data": runs[{"train": "prepare", "check": "train"}[name]]["outputs"]["out_data"]})
    key = runs["check"]["outputs"]["out_data"].split(f"s3://{bucket}/", 1)[1] + "/value.txt"
    assert store.get(bucket, key) == b"prepare;train;check"


def test_a_loop_in_object_storage_serves_on_sednas_node_and_hot_reloads_there(
        cluster: RayCluster, store: s3_mod.S3, tmp_path: pathlib.Path) -> None:
    live = start_live(tmp_path / "home", ray_address=cluster.address,
                      flavors=[*FLAVORS, SMALL], metrics_interval=0.5, s3=store.config,
                      storage_interval=0.2, ray_connect_timeout=60.0)  # one pool: every node
    il = il_live.IL(live.http, live.project_id, tmp_path / "il")
    try:
        on_sednas_node(live, il, cluster, store, tmp_path)
    finally:
        ended_service(il)
        stop_live(live)


def ended_service(il: il_live.IL) -> None:
    """Stop the loop and wait for its service to end: a server that stops leaves its tasks
    running on the cluster, where they would hold the node's CPU."""
    with contextlib.suppress(AssertionError, TypeError, KeyError):
        il.act("stop")
        job = il.show()["status"]["service"]
        factories.wait_for(lambda: il.ok("GET", f"/training-jobs/{job['job_id']}")[
            "status"]["phase"] in il_live.TERMINAL, timeout=60, what="the service to end")


def on_sednas_node(live: Live, il: il_live.IL, cluster: RayCluster, store: s3_mod.S3,
                   tmp_path: pathlib.Path) -> None:
    for name, source in (("train.py", TRAIN), ("eval.py", EVAL), ("serve.py", SERVE)):
        (il.code / name).write_text(source)
    il.dataset()
    il.initial_model(accuracy=0.25)
    bucket = store.bucket()
    spec = il.spec(threshold=0.0, samples=2, outputDir=f"s3://{bucket}/loop")
    serve = spec["deploySpec"]["template"]
    serve["spec"]["nodeName"] = "ray-000000000000"
    r = live.http.post(live.path("/incremental-learning-jobs"),
                       json={"metadata": {"name": "loop"}, "spec": spec})
    assert r.status_code == 400 and "has no node 'ray-000000000000'" in r.json()["error_msg"]
    serve["spec"]["nodeName"] = nodes.node_name(cluster.gpu_node.node_id)
    il.create(spec)
    for number, value in enumerate(("0.6", "0.9"), 1):
        il.append([value] * 4)
        done = il.wait_round(number, {"Promoted", "Failed", "Rejected"}, timeout=120)
        assert done["state"] == "Promoted", done
        il.service_log_with(f"accuracy={value}")
    env = env_of(il.service_log())
    assert env["NODE"] == cluster.gpu_node.node_id  # of the pool's three nodes, Sedna's
    off_server(env, tmp_path, "MODEL_URL", "MODEL_HOT_UPDATE_CONFIG", "MODEL_HOT_UPDATE_ACK")
    models = reloaded(il).split(";")
    assert [m.rsplit("/", 1)[1] for m in models] == ["m-v1", "m-v2", "m-v3"]
    off_server({"reloaded": ";".join(models)}, tmp_path, "reloaded")
    keys = store.keys(bucket, "loop/")
    for key in ("rounds/2/model/model.json", "deploy/models/m-v3/model.json",
                "deploy/service/model_ack.json"):
        assert f"loop/{key}" in keys, keys
    assert il.show()["status"]["model"]["version"] == 3
