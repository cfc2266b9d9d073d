"""corral on a real multi-node Ray cluster started on this machine for this module.

The cluster (`ray.cluster_utils.Cluster`) has a head and two workers of different shapes;
its processes, temp dir and address file are this module's own and go when it ends. Every
test starts its own corral server (its own state) against that one cluster.

Nodes of a simulated cluster share the host's address, so "another node" is checked by
Ray node id, which every task finds in CORRAL_RAY_NODE_ID.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

from corral.oskit import procs
from tests import factories
from tests.conftest import Live, start_live, stop_live

ray = pytest.importorskip("ray")
from ray import cluster_utils  # noqa: E402

pytestmark = [pytest.mark.ray, pytest.mark.timeout(300)]

GiB = 2**30
FLAVORS = [
    {"flavor_id": "cpu1", "cpu": 1, "memory_gb": 1},
    {"flavor_id": "cpu2", "cpu": 2, "memory_gb": 1},
    {"flavor_id": "gpu1", "cpu": 1, "memory_gb": 1, "gpu": 1},
]
#: what a task tells about where it runs (one KEY=VALUE line each)
SHOW_ENV = """
import os, sys
for key in ("CORRAL_RAY_NODE_ID", "CUDA_VISIBLE_DEVICES", "RANK", "WORLD_SIZE",
            "MASTER_ADDR", "MASTER_PORT", "CORRAL_ATTEMPT", "ASCEND_RT_VISIBLE_DEVICES"):
    print(f"{key}={os.environ.get(key, '')}")
print(f"CWD={os.getcwd()}")
"""


class RayCluster:
    def __init__(self) -> None:
        # Short: Ray's unix sockets live under it and their paths are limited to 107 bytes.
        self.tmp = tempfile.mkdtemp(prefix="cr-", dir="/tmp")
        self._env = {k: os.environ.get(k) for k in ("RAY_TMPDIR", "RAY_AUTH_MODE")}
        os.environ["RAY_TMPDIR"] = self.tmp  # the address file goes here, not /tmp/ray
        os.environ["RAY_AUTH_MODE"] = "disabled"
        os.makedirs(os.path.join(self.tmp, "ray"))
        self.cluster = cluster_utils.Cluster(
            initialize_head=True, shutdown_at_exit=True,
            head_node_args={"num_cpus": 1, "memory": 2 * GiB, "include_dashboard": False,
                            "temp_dir": self.tmp, "object_store_memory": 80 * 2**20})
        self.cpu_node = self.add(num_cpus=2)
        self.gpu_node = self.add(num_cpus=1, num_gpus=1)

    def add(self, **args: Any) -> Any:
        return self.cluster.add_node(memory=2 * GiB, object_store_memory=80 * 2**20, **args)

    @property
    def address(self) -> str:
        return str(self.cluster.address)

    def shutdown(self) -> None:
        if ray.is_initialized():
            ray.shutdown()
        self.cluster.shutdown()
        for key, value in self._env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        shutil.rmtree(self.tmp, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster() -> Iterator[RayCluster]:
    c = RayCluster()
    yield c
    c.shutdown()


def start(home: pathlib.Path, c: RayCluster) -> Live:
    # A minute to connect, not 15 s: on a busy two-core machine a fresh cluster's GCS can
    # take that long to answer its first driver.
    return start_live(home, ray_address=c.address, flavors=FLAVORS, metrics_interval=0.5,
                      ray_connect_timeout=60.0)


@pytest.fixture
def live(tmp_path: pathlib.Path, cluster: RayCluster) -> Iterator[Live]:
    lv = start(tmp_path / "home", cluster)
    yield lv
    stop_live(lv)


def log_of(live: Live, job_id: str, task: str = "worker-0", attempt: int | None = None) -> str:
    q = f"?offset=0&attempt={attempt}" if attempt else "?offset=0"
    r = live.http.get(live.path(f"/training-jobs/{job_id}/tasks/{task}/logs{q}"))
    assert r.status_code == 200, r.text
    return str(r.json()["content"])


def env_of(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def wait_log(live: Live, job_id: str, needle: str, task: str = "worker-0",
             timeout: float = 90) -> str:
    def has() -> str | None:
        text = log_of(live, job_id, task)
        return text if needle in text else None

    return str(factories.wait_for(has, timeout=timeout, what=f"{needle!r} in the log"))


def test_jobs_land_on_the_node_whose_resources_they_need(
        live: Live, cluster: RayCluster, tmp_path: pathlib.Path) -> None:
    flavors = {f["flavor_id"] for f in live.http.get(live.path("/training-job-flavors"))
               .json()["flavors"]}
    assert flavors == {"cpu1", "cpu2", "gpu1"}
    code = factories.write_code(tmp_path, SHOW_ENV + """
import pathlib, sys, time
out = pathlib.Path(sys.argv[1].split("=", 1)[1])
(out / "model.txt").write_text("trained")
time.sleep(3.5)  # long enough for a resource sample, even on a slow machine
""")
    out = tmp_path / "out"
    gpu = live.submit(factories.make_job(code_dir=code, flavor_id="gpu1",
                                         outputs={"train_url": str(out / "gpu")}))
    two = live.submit(factories.make_job(code_dir=code, flavor_id="cpu2",
                                         outputs={"train_url": str(out / "two")}))

    for job, node, gpus in ((gpu, cluster.gpu_node, "0"), (two, cluster.cpu_node, "")):
        done = live.wait(job["metadata"]["id"], timeout=120)
        assert done["status"]["phase"] == "Completed", done["status"]
        env = env_of(log_of(live, job["metadata"]["id"]))
        assert env["CORRAL_RAY_NODE_ID"] == node.node_id
        assert env["CUDA_VISIBLE_DEVICES"] == gpus
        # The code came through the object store: it ran from the actor's own copy.
        assert not env["CWD"].startswith(str(live.settings.home))
    assert (out / "gpu" / "model.txt").read_text() == "trained"
    metrics = live.http.get(live.path(f"/training-jobs/{two['metadata']['id']}/metrics/"
                                      "worker-0")).json()
    mem = next(m["value"] for m in metrics["metrics"] if m["metric"] == "memUsedMB")
    assert mem and max(mem) > 1  # sampled on the node, from the task's own processes


def test_a_nodes_custom_resource_is_an_accelerator_jobs_ask_for_by_name(
        cluster: RayCluster, tmp_path: pathlib.Path) -> None:
    npu_node = cluster.add(num_cpus=1, resources={"npu": 2})
    cluster.cluster.wait_for_nodes()
    live = start_live(tmp_path / "home", ray_address=cluster.address, flavors=[
        *FLAVORS, {"flavor_id": "npu1", "cpu": 1, "memory_gb": 1, "accelerators": {"npu": 1}}])
    try:
        [flavor] = [f for f in live.http.get(live.path("/training-job-flavors")).json()[
            "flavors"] if f["flavor_id"] == "npu1"]
        assert flavor["flavor_type"] == "Ascend"
        assert flavor["flavor_info"]["npu"]["unit_num"] == "1"
        code = factories.write_code(tmp_path, SHOW_ENV)
        job = live.submit(factories.make_job(code_dir=code, flavor_id="npu1"))
        done = live.wait(job["metadata"]["id"], timeout=60)
        assert done["status"]["phase"] == "Completed", done["status"]
        env = env_of(log_of(live, job["metadata"]["id"]))
        assert env["CORRAL_RAY_NODE_ID"] == npu_node.node_id
        assert env["ASCEND_RT_VISIBLE_DEVICES"] == "0"
        pools = live.http.get(live.path("/training-pools")).json()["pools"]
        assert pools[0]["capacity"]["accelerators"] == {"npu": 2}
    finally:
        stop_live(live)
        cluster.cluster.remove_node(npu_node)


def test_a_gang_gets_its_ranks_on_two_nodes_and_meets_at_the_master(
        live: Live, cluster: RayCluster, tmp_path: pathlib.Path) -> None:
    # Rank 0 listens on MASTER_ADDR:MASTER_PORT, rank 1 connects there and says hello: the
    # rank environment is right only if that works.
    code = factories.write_code(tmp_path, SHOW_ENV + """
import os, socket, time
addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
if os.environ["RANK"] == "0":
    with socket.create_server(("", port)) as srv:
        srv.settimeout(60)
        conn, _ = srv.accept()
        print("GOT=" + conn.recv(64).decode())
else:
    deadline = time.time() + 60
    while True:
        try:
            with socket.create_connection((addr, port), timeout=5) as s:
                s.sendall(b"hello from rank 1")
                break
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(0.1)
""")
    job = live.submit(factories.make_job(code_dir=code, flavor_id="cpu1", node_count=2))
    done = live.wait(job["metadata"]["id"], timeout=120)
    assert done["status"]["phase"] == "Completed", done["status"]
    envs = [env_of(log_of(live, job["metadata"]["id"], f"worker-{r}")) for r in (0, 1)]
    assert [e["RANK"] for e in envs] == ["0", "1"]
    assert {e["WORLD_SIZE"] for e in envs} == {"2"}
    assert envs[0]["CORRAL_RAY_NODE_ID"] != envs[1]["CORRAL_RAY_NODE_ID"]  # spread
    master = next(n for n in cluster.cluster.list_all_nodes()
                  if n.node_id == envs[0]["CORRAL_RAY_NODE_ID"])
    assert {e["MASTER_ADDR"] for e in envs} == {master.node_ip_address}
    assert envs[0]["GOT"] == "hello from rank 1"


def test_terminate_leaves_no_process_behind(live: Live, tmp_path: pathlib.Path) -> None:
    # The task starts a child and a daemonised grandchild that leaves its process group.
    job = live.submit(factories.make_job(
        command="sleep 300 & setsid sleep 301 & echo PIDS $$ $!; wait", flavor_id="cpu1"))
    job_id = job["metadata"]["id"]
    text = wait_log(live, job_id, "PIDS")
    pids = [int(p) for p in text.split("PIDS", 1)[1].split()[:2]]
    marked = factories.wait_for(lambda: _marked(job_id) if len(_marked(job_id)) >= 3 else None,
                                what="the task's three processes")
    r = live.http.post(live.path(f"/training-jobs/{job_id}/actions"),
                       json={"action_type": "terminate"})
    assert r.status_code == 202, r.text
    assert live.wait(job_id, timeout=60)["status"]["phase"] == "Terminated"
    factories.wait_for(lambda: not any(factories.alive(p) for p in [*pids, *marked]),
                       timeout=30, what="every process of the task to be gone")
    assert not _marked(job_id)


def test_a_restarted_server_adopts_a_job_running_on_ray(
        cluster: RayCluster, tmp_path: pathlib.Path) -> None:
    gate = tmp_path / "gate"
    data = tmp_path / "data"
    data.mkdir()
    (data / "x.txt").write_text("shipped once")
    code = factories.write_code(tmp_path, f"""
import os, pathlib, sys, time
data = pathlib.Path(sys.argv[1].split("=", 1)[1])
print("started pid", os.getpid(), flush=True)
while not pathlib.Path({str(gate)!r}).exists():
    time.sleep(0.05)
print("finished with", (data / "x.txt").read_text())
""")
    home = tmp_path / "home"
    first = start(home, cluster)
    job_id = first.submit(factories.make_job(code_dir=code, flavor_id="cpu1",
                                             inputs={"data_url": str(data)}))["metadata"]["id"]
    text = wait_log(first, job_id, "started pid")
    pid = int(text.split("started pid", 1)[1].split()[0])
    first.http.close()
    first.embedded.stop()  # the server goes; its job must not
    assert factories.alive(pid)

    second = start(home, cluster)
    try:
        gate.touch()
        done = second.wait(job_id, timeout=60)
        assert done["status"]["phase"] == "Completed", done["status"]
        assert len(done["status"]["running_records"]) == 1  # adopted, not started again
        text = log_of(second, job_id)
        assert text.count("started pid") == 1 and "finished with shipped once" in text
        assert text.count("corral: inputs copied to this node") == 1  # not shipped again
    finally:
        stop_live(second)


def test_a_job_whose_node_dies_is_placed_again_and_completes(
        live: Live, cluster: RayCluster, tmp_path: pathlib.Path) -> None:
    # Its first attempt waits to be killed; once placed again it simply ends.
    code = factories.write_code(tmp_path, SHOW_ENV + """
import os, time
if os.environ["CORRAL_ATTEMPT"] == "1":
    print("pid", os.getpid(), flush=True)
    time.sleep(600)
""")
    job = live.submit(factories.make_job(code_dir=code, flavor_id="cpu2", retries=0))
    job_id = job["metadata"]["id"]
    text = wait_log(live, job_id, "pid ")
    assert env_of(text)["CORRAL_RAY_NODE_ID"] == cluster.cpu_node.node_id
    pid = int(text.split("pid ", 1)[1].split()[0])

    cluster.cluster.remove_node(cluster.cpu_node, allow_graceful=False)
    factories.wait_for(lambda: live.job(job_id)["status"]["phase"] == "Pending", timeout=120,
                       what="the job to be queued again")
    factories.wait_for(lambda: not factories.alive(pid), timeout=30,
                       what="the task to die with its node")
    cluster.cpu_node = cluster.add(num_cpus=2)  # the only place cpu2 fits again

    done = live.wait(job_id, timeout=120)
    assert done["status"]["phase"] == "Completed", done["status"]
    lost, rerun = done["status"]["running_records"]
    assert lost["end_reason"] == "node lost"
    assert lost["end_related_task"] == "worker-0"
    assert lost["end_recover"] == "job_reschedule"
    assert rerun["start_type"] == "init_or_rescheduled"
    assert rerun["end_reason"] == "job completed"
    env = env_of(log_of(live, job_id, attempt=2))
    assert env["CORRAL_RAY_NODE_ID"] == cluster.cpu_node.node_id


# --- reservations ---------------------------------------------------------------------------


def as_driver(c: RayCluster, code: str) -> Any:
    """Run `code` in a Ray driver of its own on the cluster; what it prints, as JSON."""
    prelude = ("import json, ray\n"
               "from ray.util.placement_group import placement_group, placement_group_table\n"
               f"ray.init(address={c.address!r}, namespace='corral', logging_level='ERROR')\n")
    out = subprocess.run([sys.executable, "-c", prelude + code], capture_output=True,
                         text=True, timeout=120, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def slot_groups(c: RayCluster) -> list[str]:
    """The single tasks' placement groups the cluster holds."""
    names = as_driver(c, "print(json.dumps(sorted(g['name'] for g in "
                         "placement_group_table().values() if g['state'] != 'REMOVED')))")
    return [n for n in names if n.startswith("corral-slot-")]


def test_queued_jobs_of_one_shape_take_turns_on_one_reservation_and_none_outlives_the_server(
        cluster: RayCluster, tmp_path: pathlib.Path) -> None:
    # What a server killed with a reservation kept for reuse leaves behind: the next one
    # gives it back to Ray as it starts (none of its agents' tasks holds it).
    as_driver(cluster, "g = placement_group([{'CPU': 1}], name='corral-slot-orphan', "
                       "lifetime='detached'); g.wait(60); print('true')")
    assert slot_groups(cluster) == ["corral-slot-orphan"]
    home = tmp_path / "home"
    live = start(home, cluster)
    try:
        assert slot_groups(cluster) == []
        # cpu2 fits on one node only, one job at a time: each starts as the last ends.
        ids = [live.submit(factories.make_job(command="echo turn", flavor_id="cpu2")
                           )["metadata"]["id"] for _ in range(3)]
        for job_id in ids:
            assert live.wait(job_id, timeout=120)["status"]["phase"] == "Completed"
        plans = [json.loads(p.read_text()) for p in home.rglob("*.outputs.json")]
        assert len(plans) == 3
        groups = {plan["group"] for plan in plans}
        assert len(groups) == 1 and groups.pop().startswith("corral-slot-")
    finally:
        stop_live(live)
    assert slot_groups(cluster) == []  # kept for a while, and given back when it stops


# --- pools on executors of their own, and files copied back ---------------------------------

WRITER = """
import hashlib, json, os, pathlib, sys
args = dict(a[2:].split("=", 1) for a in sys.argv[1:])
out = pathlib.Path(args["train_url"])
print("OUT=" + str(out))
print("METRICS=" + os.environ["CORRAL_METRICS_FILE"])
print("SEED=" + (out / "seed.txt").read_text())  # what the channel held before the job
(out / "model.txt").write_text("trained on ray")
(out / "ckpt").mkdir()
blob = os.urandom(3 * 2**20 // 2)  # more than one chunk of the copy
(out / "ckpt" / "weights.bin").write_bytes(blob)
print("SHA=" + hashlib.sha256(blob).hexdigest())
with open(os.environ["CORRAL_METRICS_FILE"], "a") as fh:
    for step, loss in ((1, 0.5), (2, 0.25)):
        fh.write(json.dumps({"step": step, "loss": loss}) + "\\n")
"""


def in_pool(body: dict[str, Any], pool_id: str) -> dict[str, Any]:
    body["spec"]["resource"]["pool_id"] = pool_id
    return body


def test_a_local_pool_and_a_ray_pool_side_by_side_and_outputs_come_back_from_ray(
        cluster: RayCluster, tmp_path: pathlib.Path) -> None:
    live = start_live(tmp_path / "home", flavors=FLAVORS, metrics_interval=0.5,
                      pools=[{"pool_id": "cpu", "executor": "local"},
                             {"pool_id": "ray", "address": cluster.address}])
    try:
        shown = live.http.get(live.path("/training-pools")).json()["pools"]
        pools = {p["pool_id"]: sorted(n["name"] for n in p["nodes"]) for p in shown}
        assert pools["cpu"] == ["local"] and pools["default"] == []
        runs = {p["pool_id"]: (p["executor"], p["address"]) for p in shown}
        assert runs == {"default": ("local", None), "cpu": ("local", None),
                        "ray": ("ray", cluster.address)}
        assert len(pools["ray"]) == 3 and all(n.startswith("ray-") for n in pools["ray"])

        here = live.submit(in_pool(factories.make_job(
            command="echo node=${CORRAL_RAY_NODE_ID:-none}", flavor_id="cpu1"), "cpu"))
        out = tmp_path / "out"
        out.mkdir()
        (out / "seed.txt").write_text("from before")
        code = factories.write_code(tmp_path, SHOW_ENV + WRITER)
        there = live.submit(in_pool(factories.make_job(
            name="raymodel", code_dir=code, flavor_id="cpu2",
            outputs={"train_url": str(out)}), "ray"))

        done = live.wait(here["metadata"]["id"], timeout=60)
        assert done["status"]["phase"] == "Completed", done["status"]
        assert "node=none" in log_of(live, here["metadata"]["id"])  # on this machine
        job_id = there["metadata"]["id"]
        done = live.wait(job_id, timeout=120)
        assert done["status"]["phase"] == "Completed", done["status"]
        env = env_of(log_of(live, job_id))
        assert env["CORRAL_RAY_NODE_ID"] == cluster.cpu_node.node_id
        # The task wrote into a scratch folder of its node, not into the server's paths ...
        assert env["OUT"] != str(out) and not env["OUT"].startswith(str(tmp_path))
        assert not env["METRICS"].startswith(str(live.settings.home))
        assert env["SEED"] == "from before"
        # ... and its files are where the job's channel says, once it has completed.
        assert (out / "model.txt").read_text() == "trained on ray"
        blob = (out / "ckpt" / "weights.bin").read_bytes()
        assert hashlib.sha256(blob).hexdigest() == env["SHA"]
        # Its metrics file came back too, and the ended job registered its model.
        model = factories.wait_for(lambda: _json(live, "/models/raymodel/versions/1"),
                                   timeout=30, what="the model to be registered")
        assert model["file_count"] == 3 and model["metrics"] == {"loss": 0.25}
        metrics = _json(live, f"/training-jobs/{job_id}/training-metrics")
        assert [m["value"] for m in metrics["metrics"] if m["metric"] == "loss"] == [[0.5, 0.25]]
    finally:
        stop_live(live)


#: what a task tells about its inputs: where they are, and a digest of each file
READER = """
import hashlib, os, sys
args = dict(a[2:].split("=", 1) for a in sys.argv[1:])
print("NODE " + os.environ["CORRAL_RAY_NODE_ID"])
for name in ("data_url", "remote"):
    top = args[name]
    print(f"PATH {name} {top}")
    for root, _, files in os.walk(top):
        for f in files:
            path = os.path.join(root, f)
            digest = hashlib.sha256(open(path, "rb").read()).hexdigest()
            print(f"FILE {name} {os.path.relpath(path, top)} {digest}")
"""


def test_inputs_reach_nodes_without_a_shared_file_system(
        cluster: RayCluster, tmp_path: pathlib.Path) -> None:
    from tests import s3 as s3_mod

    store = s3_mod.start()
    half = {"flavor_id": "half", "cpu": 0.5, "memory_gb": 1}  # two fit on every node
    live = start_live(tmp_path / "home", ray_address=cluster.address,
                      flavors=[*FLAVORS, half], s3=store.config)
    try:
        bucket = store.bucket()
        store.put(bucket, "set/part-0.txt", b"from object storage")
        store.put(bucket, "set/sub/part-1.bin", os.urandom(3000))
        data = tmp_path / "data"
        (data / "nested").mkdir(parents=True)
        (data / "big.bin").write_bytes(os.urandom(5 * 2**20))  # more than one piece
        (data / "nested" / "x.txt").write_text("local")
        code = factories.write_code(tmp_path, READER)
        body = factories.make_job(code_dir=code, flavor_id="half", node_count=2,
                                  inputs={"data_url": str(data), "remote": f"s3://{bucket}/set"})
        body["spec"]["schedule_policy"] = {"placement": "pack"}  # both on one node
        job_id = live.submit(body)["metadata"]["id"]
        done = live.wait(job_id, timeout=90)
        assert done["status"]["phase"] == "Completed", done["status"]

        logs = [log_of(live, job_id, f"worker-{rank}") for rank in (0, 1)]
        seen = [{tuple(ln.split()[1:]) for ln in text.splitlines()
                 if ln.startswith(("NODE ", "PATH "))} for text in logs]
        assert seen[0] == seen[1]  # one node, one copy of the attempt's inputs there
        paths = {p[0]: p[1] for p in seen[0] if len(p) == 2}
        staged = live.settings.runs_dir / job_id / "inputs" / "remote"
        assert paths["data_url"] != str(data) and paths["remote"] != str(staged)
        assert not any(p.startswith((str(tmp_path), str(live.settings.home)))
                       for p in paths.values())
        files = {tuple(ln.split()[1:3]): ln.split()[3] for ln in logs[0].splitlines()
                 if ln.startswith("FILE ")}
        assert files == {
            ("data_url", "big.bin"): _sha(data / "big.bin"),
            ("data_url", "nested/x.txt"): _sha(data / "nested" / "x.txt"),
            ("remote", "part-0.txt"): _sha(staged / "part-0.txt"),
            ("remote", "sub/part-1.bin"): _sha(staged / "sub" / "part-1.bin")}
        assert "corral: inputs copied to this node: 4 file(s), 5.2 MB" in (logs[0] + logs[1])
        # The copy goes with the attempt's last task on the node.
        factories.wait_for(lambda: not any(os.path.exists(p) for p in paths.values()),
                           timeout=15, what="the node's copy of the inputs to go")
    finally:
        stop_live(live)
        store.stop()


def _sha(path: pathlib.Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs Ray (and so its agents) running as root")
def test_run_as_starts_ray_tasks_as_that_user(cluster: RayCluster) -> None:
    nobody = pwd.getpwnam("nobody")
    top = pathlib.Path(tempfile.mkdtemp(prefix="corral-ray-run-as-"))
    live = start_live(top / "home", ray_address=cluster.address, flavors=FLAVORS,
                      run_as="nobody")
    try:
        key = live.settings.key_file
        script = (f"id -u; cat {key} >/dev/null 2>&1 && echo READ-THE-KEY || echo key-denied; "
                  'echo made > "${1#--o=}"/result.txt')
        job = live.submit(factories.make_job(command=f"sh -c '{script}' task",
                                             flavor_id="cpu1", outputs={"o": str(top / "o")}))
        done = live.wait(job["metadata"]["id"], timeout=60)
        text = log_of(live, job["metadata"]["id"])
        assert done["status"]["phase"] == "Completed", text
        assert text.split()[:2] == [str(nobody.pw_uid), "key-denied"]
        assert (top / "o" / "result.txt").read_text() == "made\n"
    finally:
        stop_live(live)
        shutil.rmtree(top, ignore_errors=True)


def _json(live: Live, path: str) -> Any:
    r = live.http.get(live.path(path))
    return r.json() if r.status_code == 200 else None


def _marked(job_id: str) -> list[int]:
    """Processes on this machine that carry a launch marker of the job's tasks."""
    return procs.carrying(f"CORRAL_JOB_ID={job_id}".encode())



def test_a_standby_that_takes_over_adopts_the_dead_leader_s_ray_task(
        cluster: RayCluster, tmp_path: pathlib.Path, pg_url: str) -> None:
    from tests.integration import test_crash as crash
    from tests.integration import test_ha as ha

    with ha.pair(tmp_path, pg_url, pg_url, CORRAL_RAY_ADDRESS=cluster.address) as p:
        epoch, leader = factories.wait_for(p.leader, 30, "a leader")
        job_id = p.submit(leader, "on-ray", 6.0)
        factories.wait_for(lambda: crash.started(p.shared).get("on-ray"), 90,
                           "the task to start on Ray")
        leader.kill()  # kill -9; its Ray task goes on
        _, successor = factories.wait_for(
            lambda: (now := p.leader()) is not None and now[0] > epoch and now, 30,
            "the standby to lead")
        done = successor.wait(job_id, 90)
        assert done["status"]["phase"] == "Completed", done["status"]
        assert len(done["status"]["running_records"]) == 1  # adopted, not started again
        assert len(crash.started(p.shared)["on-ray"]) == 1
        assert len(crash.finished(p.shared)["on-ray"]) == 1


def test_the_nodes_page_sees_each_ray_nodes_own_use(live: Live, cluster: RayCluster) -> None:
    """Each node's use over time, as its agent reads it on the node (machine-wide: the
    nodes of this test cluster share one machine), for every node alive, whether or not a
    task of ours ran there."""
    names = {n["name"] for n in live.http.get("/corral/info").json()["nodes"]}
    assert len(names) == 3  # the head, the CPU node and the "GPU" node

    def sampled() -> dict[str, Any] | None:
        r = live.http.get("/corral/node-usage", params={"minutes": 5})
        assert r.status_code == 200, r.text
        nodes = {n["name"]: n for n in r.json()["nodes"]}
        return nodes if all(nodes[name]["times"] for name in names) else None

    nodes = factories.wait_for(sampled, timeout=60, what="a sample of each Ray node")
    for node in nodes.values():
        assert all(0 <= c <= 100 for c in node["cpu_percent"])
        assert all(m > 0 for m in node["mem_mb"])
        assert node["gpu_util"] is None  # Ray's GPU here is a number, with no NVML behind it


def test_a_notebook_on_a_ray_pool_runs_on_a_node_behind_the_proxy_and_keeps_its_workspace(
        cluster: RayCluster, tmp_path: pathlib.Path) -> None:
    """A notebook's JupyterLab on a node of the cluster, reached over TCP with its token
    through the same proxy (HTTP and the kernel's websocket); its workspace on the file
    system the cluster shares, kept across stop and start. A cluster that shares no file
    system with the server is refused one, in words."""
    from corral.store import notebook_repo
    from tests.api import test_notebooks as nbs

    plain = start(tmp_path / "plain", cluster)
    try:
        r = plain.http.post(nbs.path(plain), json={"name": "nope", "flavor": "cpu1"})
        assert r.status_code == 400, r.text
        assert "ray_shared_fs" in r.json()["error_msg"]
    finally:
        stop_live(plain)

    live = start_live(tmp_path / "home", ray_address=cluster.address, flavors=FLAVORS,
                      ray_shared_fs=True, notebook_check_interval=0.2, metrics_interval=0.5)
    try:
        nb_id = nbs.create(live, "on-ray", flavor="cpu1")["id"]
        nbs.wait(live, nb_id, "RUNNING", timeout=120)
        kernel = nbs.new_kernel(live, nb_id)
        node = nbs.run_code(live, nb_id, kernel, "import os; os.environ['CORRAL_RAY_NODE_ID']")
        names = {n.node_id for n in cluster.cluster.list_all_nodes()}
        assert node is not None and node.strip("'") in names  # its kernel runs on a node
        with live.embedded.platform.store.read() as conn:
            row = notebook_repo.by_id(conn, nb_id)
        assert row is not None and row.port is not None and row.jupyter_token
        # Its token is in a file of the task user's, never in its job's record.
        job_id = nbs.show(live, nb_id)["job_id"]
        record = live.http.get(live.path(f"/training-jobs/{job_id}")).text
        assert str(row.port) in record and row.jupyter_token not in record
        # Reached on its node without corral's proxy, JupyterLab asks for its token.
        direct = nbs.httpx.get(f"http://127.0.0.1:{row.port}/notebooks/{nb_id}/api/status")
        assert direct.status_code == 403, direct.text

        put = live.http.put(nbs.proxied(live, nb_id, "api/contents/kept.txt"),
                            json={"type": "file", "format": "text", "content": "kept"})
        assert put.status_code == 201, put.text
        assert live.http.post(nbs.path(live, f"/{nb_id}/stop")).status_code == 200
        nbs.wait(live, nb_id, "STOPPED", timeout=60)
        assert live.http.post(nbs.path(live, f"/{nb_id}/start")).status_code == 200
        nbs.wait(live, nb_id, "RUNNING", timeout=120)
        got = live.http.get(nbs.proxied(live, nb_id, "api/contents/kept.txt"))
        assert got.status_code == 200 and got.json()["content"] == "kept"
        nbs.remove(live, nb_id)
    finally:
        stop_live(live)


def test_a_search_runs_its_trials_on_the_cluster_and_keeps_the_best(
        live: Live, tmp_path: pathlib.Path) -> None:
    """A hyperparameter search on a Ray pool: its trials are jobs placed on the cluster's
    nodes, their rewards read from their logs there, and the best trial's outputs come
    back from its node and are registered as the search's model."""
    from corral.store import model_repo
    from tests.integration import search_rig as rig

    out = tmp_path / "out"
    body = rig.body(rig.code(tmp_path), rig.policy(samples=3, parallel=2),
                    outputs={"train_url": str(out)})
    body["spec"]["resource"]["flavor_id"] = "cpu1"
    job = live.submit(body)
    job_id = job["metadata"]["id"]
    done = live.wait(job_id, timeout=180)

    assert done["status"]["phase"] == "Completed", done["status"]
    trials = rig.trials(live, job_id)
    assert [t.state for t in trials] == ["completed"] * 3
    for t in trials:  # each ran on a node of the cluster
        with live.embedded.platform.store.read() as conn:
            tasks = launched(conn, t.job_id)
        assert tasks and all(h.node_id for h in tasks), tasks
    best = max(trials, key=lambda t: t.reward)
    lr, width = (out / f"trial-{best.number}" / "params.txt").read_text().split()
    assert f"{float(lr):g}" in best.params and width in best.params
    with live.embedded.platform.store.read() as conn:
        model = model_repo.get(conn, live.project_id, job["metadata"]["name"])
        assert model_repo.resolve(conn, model, None, None).source_job_id == best.job_id


def launched(conn: Any, job_id: str) -> list[Any]:
    """The handles of a job's launched tasks."""
    from corral.executors import base
    from corral.store import job_repo

    return [base.Handle.loads(t.handle) for t in job_repo.tasks_of(conn, job_id) if t.handle]
