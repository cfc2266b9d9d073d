"""A followed input on a Ray node (`LaunchSpec.follow`): the node's copy kept up to date while
the task runs, with the real executor and node agents on fake Ray (`fakeray`)."""

from __future__ import annotations

import json
import os
import pathlib
import sys
import tempfile
from collections.abc import Iterator

import pytest

from corral.executors import base
from corral.executors.ray import cluster, files
from tests import factories
from tests.unit import fakeray
from tests.unit.fakeray import Cluster
from tests.unit.test_ray_executor import ended, spec_for

#: a service: prints what its config names each time it changes, until told to stop
SERVE = """
import json, os, sys, time
deploy = dict(a[2:].split("=", 1) for a in sys.argv[1:])["deploy_url"]
print("DEPLOY", deploy, flush=True)
seen = None
while not os.path.exists(os.path.join(deploy, "stop")):
    try:
        conf = json.load(open(os.path.join(deploy, "model_config.json")))
    except (OSError, ValueError):
        conf = None
    if conf and conf != seen:
        seen = conf
        path = conf["model_path"]
        print("LOADED", path, open(os.path.join(path, "w.txt")).read(), flush=True)
    time.sleep(0.05)
print("OWN", sorted(os.listdir(deploy)), flush=True)
"""


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[Cluster]:
    yield from fakeray.running(monkeypatch)


@pytest.fixture
def node_tmp(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    node = tmp_path / "node"
    node.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(node))
    monkeypatch.setattr(files, "INTERVAL", 0.1)
    return node


def deploy(folder: pathlib.Path, version: int, weights: str) -> None:
    """What a loop's deploy writes: the model, then model_config.json naming it."""
    model = folder / "models" / f"m-v{version}"
    model.mkdir(parents=True)
    (model / "w.txt").write_text(weights)
    (folder / "model_config.json").write_text(json.dumps({"model_path": str(model)}))


def test_a_followed_input_is_kept_up_to_date_on_the_node_and_names_its_copy(
        tmp_path: pathlib.Path, fake: Cluster, node_tmp: pathlib.Path) -> None:
    folder = tmp_path / "server" / "deploy"
    deploy(folder, 1, "first")
    own = folder / "service"  # the task's own output, inside what it follows
    own.mkdir()
    (own / "ack.json").write_text("{}")
    spec = spec_for(tmp_path / "home", "f1", input_dirs=(str(folder),), argv=(
        sys.executable, "-c", SERVE, f"--deploy_url={folder}"))
    spec = base.LaunchSpec(**{**spec.__dict__, "follow": (0,), "output_dirs": (str(own),)})
    ex = cluster.RayExecutor("127.0.0.1:1")
    try:
        handle = ex.launch(spec)
        log = pathlib.Path(spec.log_path)
        factories.wait_for(lambda: log.exists() and "LOADED" in log.read_text(), timeout=20,
                           what="the first model loaded on the node")
        deploy(folder, 2, "second")
        factories.wait_for(lambda: "second" in log.read_text(), timeout=20,
                           what="the second model reaching the node")
        (folder / "stop").write_text("")
        assert ended(ex, handle).exit_code == 0
    finally:
        ex.close()
    lines = log.read_text().splitlines()
    node_copy = next(ln.split()[1] for ln in lines if ln.startswith("DEPLOY "))
    assert node_copy.startswith(str(node_tmp))
    loaded = [ln.split()[1:] for ln in lines if ln.startswith("LOADED ")]
    # Each config names the node's copy of the model it was written after, never the
    # server's folder, and that copy was whole when the config arrived.
    assert loaded == [[os.path.join(node_copy, "models", "m-v1"), "first"],
                      [os.path.join(node_copy, "models", "m-v2"), "second"]]
    # What lies in the task's own output channel is not followed.
    assert next(ln for ln in lines if ln.startswith("OWN ")) == (
        "OWN ['model_config.json', 'models', 'stop']")
