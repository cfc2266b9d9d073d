"""What a pipeline body may say: its graph, its references, and the jobs its tasks become."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

from corral.cli import pipelines
from corral.domain import errors, resources
from corral.domain.pipelines import build, dag, shape, spec


def _task(name: str, deps: tuple[str, ...] = (), **extra: Any) -> dict[str, Any]:
    alg = extra.pop("algorithm", {"command": "true"})
    return {"name": name, "depends_on": list(deps), "algorithm": alg, **extra}


def _body(*tasks: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p"}, "tasks": list(tasks), **extra}


def _refused(body: dict[str, Any]) -> str:
    with pytest.raises(errors.BadParameter) as err:
        build.parse(body)
    return err.value.message


def test_a_cycle_is_refused_with_its_path() -> None:
    said = _refused(_body(_task("a", ("c",)), _task("b", ("a",)), _task("c", ("b",)),
                          _task("d")))
    assert "cycle: a -> c -> b -> a" in said


def test_a_missing_name_is_refused_with_the_name_likely_meant() -> None:
    said = _refused(_body(_task("train"), _task("eval", ("trian",))))
    assert said == ("task 'eval' depends on 'trian', which is not a task of the pipeline "
                    "(did you mean 'train'?)")
    assert "depends on itself" in _refused(_body(_task("a", ("a",))))


def test_tasks_are_ordered_after_what_they_depend_on_and_else_as_written() -> None:
    deps = {"z": ["b"], "a": [], "b": ["a"], "c": []}
    assert dag.check(deps) == ["a", "c", "b", "z"]
    assert dag.downstream(deps, "a") == {"a", "b", "z"}
    assert dag.ancestors(deps, "z") == {"a", "b"}


OUT = {"command": "true", "outputs": [{"name": "o"}]}


@pytest.mark.parametrize(("tasks", "said"), [
    ([_task("a"), _task("b", algorithm={"command": "true", "inputs": [
        {"name": "i", "from": "a.outputs.o"}]})], "does not depend on 'a'"),
    ([_task("a", algorithm=OUT), _task("b", ("a",), algorithm={"command": "true", "inputs": [
        {"name": "i", "from": "a.outputs.x"}]})], "task 'a' has no output channel 'x'"),
    ([_task("a"), _task("b", ("a",), algorithm={"command": "true", "inputs": [
        {"name": "i", "from": "a.o"}]})], "is not TASK.outputs.CHANNEL"),
    ([_task("a"), _task("b", ("a",), when="x.acc > 1")], "'x' is not a task"),
    ([_task("a"), _task("b", ("a",), when="params.nope > 1")], "no parameter 'nope'"),
    ([_task("a", for_each=[{"x": 1}, {"x": 2}]), _task("b", ("a",), when="a.acc > 1")],
     "fans out into 2 items: name one"),
    ([_task("a", for_each=[{"x": 1}]), _task("b", ("a",), when="a[3].acc > 1")],
     "has items 0 to 0"),
    ([_task("a"), _task("b", ("a",), when="a[0].acc > 1")], "does not fan out"),
    ([_task("a"), _task("b", ("a",), algorithm={"command": "true", "parameters": [
        {"name": "n", "param": "missing"}]})], "no parameter 'missing'"),
    ([_task("a", **{"finally": True}), _task("b", ("a",))], "a `finally` task"),
    ([_task("a"), _task("a")], "two tasks are named 'a'"),
    ([_task("a-b")], "task name 'a-b'"),
    ([_task("a", parallelism=2)], "parallelism goes with for_each"),
    ([_task("a", algorithm={"command": "true", "outputs": [
        {"name": "o", "remote": {"obs": {"obs_url": "/x"}}}]})], "places its tasks' outputs"),
    ([_task("a", algorithm={"boot_file": "x.py"})], "task 'a': algorithm"),
    ([_task("a", algorithm={"command": "true", "inputs": [{"name": "i"}]})],
     "give `from` or `remote.obs.obs_url`"),
])
def test_references_that_cannot_be_met_are_refused(tasks: list[dict[str, Any]],
                                                   said: str) -> None:
    assert said in _refused(_body(*tasks))


def test_the_model_names_an_output_channel_of_one_run() -> None:
    fan = _task("t", for_each=[{"x": 1}, {"x": 2}], algorithm=OUT)
    assert "name one (t[0])" in _refused(_body(fan, model={"task": "t", "channel": "o",
                                                           "name": "m"}))
    assert "no output channel 'x'" in _refused(_body(fan, model={"task": "t[1]",
                                                                 "channel": "x", "name": "m"}))
    assert build.parse(_body(fan, model={"task": "t[1]", "channel": "o", "name": "m"}))


def test_durations_read_as_people_write_them() -> None:
    assert [spec.parse_duration(v, "t") for v in (90, "90s", "10m", "2h", "1d")] == [
        90, 90, 600, 7200, 86400]
    for bad in ("soon", 0, "-5m", True):
        with pytest.raises(ValueError):
            spec.parse_duration(bad, "t")


def _fan_pipeline() -> shape.Shape:
    return build.parse(_body(
        _task("prep", algorithm={"command": "true", "outputs": [{"name": "data"}]}),
        _task("train", ("prep",), for_each=[{"lr": 0.1}, {"lr": 0.01}], retries=2,
              algorithm={"code_dir": "/code", "boot_file": "train.py",
                         "parameters": [{"name": "epochs", "param": "epochs"},
                                        {"name": "lr", "value": 1},
                                        {"name": "rows", "metric": "prep.rows"}],
                         "inputs": [{"name": "data", "from": "prep.outputs.data"},
                                    {"name": "extra", "remote": {"obs": {"obs_url": "/e"}}}],
                         "outputs": [{"name": "model"}]}),
        _task("eval", ("train",), for_each=[{}, {}], algorithm={
            "command": "true", "inputs": [{"name": "m", "from": "train.outputs.model"}]}),
        parameters={"epochs": 10}))


def test_a_runs_job_gets_what_its_references_resolve_to() -> None:
    checked = _fan_pipeline()
    body, given = build.job_body(
        checked, "train", 1, attempt=2, base="/out/p-1", name="p", params={"epochs": "30"},
        overrides={"train": {"epochs": "40"}},
        output_of=lambda key, ch: f"/out/p-1/{key}/{ch}",
        metric_of=lambda key, name: {("prep", "rows"): 300.0}[(key, name)])
    assert given.parameters == {"epochs": "40", "lr": "0.01", "rows": "300"}
    assert given.inputs == {"data": "/out/p-1/prep/data", "extra": "/e"}
    assert given.outputs == {"model": "/out/p-1/train/a2-1/model"}
    assert [(p.name, p.value) for p in body.algorithm.parameters] == [
        ("epochs", "40"), ("lr", "0.01"), ("rows", "300")]
    assert body.metadata.annotations == {"corral/register-model": "never",
                                         "fault-tolerance/job-retry-num": "2"}


def test_a_task_that_fans_out_alike_reads_the_same_item() -> None:
    checked = _fan_pipeline()
    _, given = build.job_body(checked, "eval", 1, attempt=1, base="/b", name="p", params={},
                              overrides={}, output_of=lambda key, ch: f"{key}:{ch}",
                              metric_of=lambda key, name: 0.0)
    assert given.inputs == {"m": "train[1]:model"}


def test_the_cache_key_is_the_job_less_the_places_of_its_channels() -> None:
    checked = _fan_pipeline()

    def key(attempt: int, item: int, base: str, code: str = "c1", data: str = "d1") -> str:
        body, _ = build.job_body(checked, "train", item, attempt=attempt, base=base,
                                 name="p", params={"epochs": "3"}, overrides={},
                                 output_of=lambda k, ch: f"{base}/{k}/{ch}",
                                 metric_of=lambda k, name: 1.0)
        return build.cache_key(body, code, {"data": data, "extra": "e"})

    assert key(1, 0, "/a") == key(2, 0, "/b")  # another attempt, another pipeline
    assert key(1, 0, "/a") != key(1, 1, "/a")  # another lr
    assert key(1, 0, "/a") != key(1, 0, "/a", code="c2")
    assert key(1, 0, "/a") != key(1, 0, "/a", data="d2")


EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "pipelines"


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*/pipeline.yaml")), ids=str)
def test_the_example_pipelines_hold_only_known_keys_and_fit_2_cores(path: pathlib.Path) -> None:
    body = pipelines.load_pipeline_file(path)  # refuses unknown keys

    checked = build.parse(body)
    node = resources.Node(name="local", cpu=2, memory_mb=8192)
    flavors = {f.flavor_id for f in resources.default_flavors(node)}
    for t in checked.body.tasks:
        assert t.spec.resource.flavor_id in (None, *flavors)
        assert pathlib.Path(t.algorithm.code_dir or "/").is_dir()
