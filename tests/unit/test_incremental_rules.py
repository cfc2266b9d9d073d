"""The rules of incremental-learning loops: the spec as a Sedna user writes it, Sedna's
operators, daily windows, the evaluation's metrics, and how new samples are split."""

from __future__ import annotations

from typing import Any

import pytest

from corral.domain import errors
from corral.domain.incremental import loopspec, samples, triggers

TEMPLATE = {"algorithm": {"command": "python train.py"}}


def body(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "dataset": {"name": "ds", "trainProb": 0.8}, "initialModel": {"name": "m"},
        "trainSpec": {"template": TEMPLATE, "trigger": {
            "checkPeriodSeconds": 60, "timer": {"start": "02:00", "end": "20:00"},
            "condition": {"operator": ">", "threshold": 500, "metric": "num_of_samples"}}},
        "evalSpec": {"template": TEMPLATE},
        "deploySpec": {"model": {"name": "m", "hotUpdateEnabled": True,
                                 "pollPeriodSeconds": 60},
                       "trigger": {"condition": {"operator": ">", "threshold": 0.1,
                                                 "metric": "precision_delta"}},
                       "hardExampleMining": {"name": "IBT", "parameters": [
                           {"key": "threshold_img", "value": 0.9}]},
                       "template": TEMPLATE},
        "outputDir": "/output"}
    base.update(spec)
    return {"apiVersion": "sedna.io/v1alpha1", "kind": "IncrementalLearningJob",
            "metadata": {"name": "helmet"}, "spec": base}


def refusal(data: dict[str, Any]) -> str:
    with pytest.raises(errors.BadParameter) as exc:
        loopspec.parse(data)
    return exc.value.message


def test_a_sedna_job_loads_with_its_field_names() -> None:
    loop = loopspec.parse(body())
    spec = loop.spec
    assert spec.trainSpec.trigger.timer and spec.trainSpec.trigger.timer.minutes() == (120, 1200)
    assert spec.deploySpec.hardExampleMining is not None
    assert spec.deploySpec.hardExampleMining.parameters[0].value == "0.9"
    assert (spec.model_name, spec.deploySpec.model.alias, spec.maxFailedRounds) == (
        "m", "production", 3)
    assert spec.deploySpec.model.ack_timeout_s == 150


def test_a_misspelt_field_is_refused_not_defaulted() -> None:
    data = body()
    data["spec"]["trainSpec"]["trigger"]["checkPeriodSecond"] = 5
    assert "checkPeriodSecond" in refusal(data)


@pytest.mark.parametrize(("change", "words"), [
    ({"trainSpec": {"template": TEMPLATE, "trigger": {"condition": {
        "operator": ">", "threshold": 1, "metric": "accuracy"}}}}, "num_of_samples"),
    ({"trainSpec": {"template": TEMPLATE, "trigger": {"condition": {
        "operator": "=>", "threshold": 1, "metric": "num_of_samples"}}}}, "not one of"),
    ({"trainSpec": {"template": TEMPLATE, "trigger": {"timer": {
        "start": "25:00", "end": "01:00"}}}}, "HH:MM"),
    ({"dataset": {"name": "ds", "trainProb": 1.0}}, "trainProb"),
    ({"evalSpec": {"template": {"algorithm": {}}}}, "code_dir + boot_file, or command"),
    ({"evalSpec": {"template": {**TEMPLATE, "model": {"name": "x"}}}}, "the loop sets it"),
    ({"deploySpec": {"trigger": {"condition": {"operator": ">", "threshold": 0,
                                               "metric": "precision delta"}}}}, "metric"),
])
def test_what_cannot_work_is_refused_at_submit(change: dict[str, Any], words: str) -> None:
    assert words in refusal(body(**change))


@pytest.mark.parametrize(("operator", "value", "expected"), [
    ("gt", 0.5, True), (">", 0.3, False), ("ge", 0.3 + 1e-7, True), (">=", 0.2, False),
    ("eq", 0.3000004, True), ("=", 0.31, False), ("==", 0.3, True),
    ("ne", 0.3000001, False), ("!=", 0.4, True),
    ("le", 0.3, True), ("<=", 0.31, False), ("lt", 0.2999995, False), ("<", 0.1, True)])
def test_sednas_operators_with_equality_within_a_millionth(
        operator: str, value: float, expected: bool) -> None:
    assert triggers.compare(value, operator, 0.3) is expected


@pytest.mark.parametrize(("start", "end", "minute", "inside"), [
    (120, 1200, 119, False), (120, 1200, 120, True), (120, 1200, 1199, True),
    (120, 1200, 1200, False),
    (1380, 60, 1380, True), (1380, 60, 1439, True), (1380, 60, 0, True), (1380, 60, 59, True),
    (1380, 60, 60, False), (1380, 60, 720, False),
    (600, 600, 0, True)])
def test_a_window_whose_start_is_after_its_end_wraps_midnight(
        start: int, end: int, minute: int, inside: bool) -> None:
    assert triggers.in_window(start, end, minute) is inside


FINAL = {"0/accuracy": 0.9, "1/accuracy": 0.85, "0/precision.0": 0.7, "0/precision.1": 0.8,
         "1/precision.0": 0.6, "1/precision.1": 0.75, "0/loss": 0.1, "1/loss": 0.2,
         "accuracy": 0.5}


def value(metric: str, final: dict[str, float] = FINAL) -> float:
    return triggers.value_of(triggers.parse_metric(metric),
                             triggers.evaluation_results(final))


def test_the_new_models_metric_and_its_delta_for_numbers_and_lists() -> None:
    assert value("accuracy") == 0.9
    assert value("accuracy_delta") == pytest.approx(0.05)
    assert value("precision[1]") == 0.8
    assert value("precision_delta[1]") == pytest.approx(0.05)
    assert value("loss_delta") == pytest.approx(-0.1)
    assert triggers.flat(triggers.evaluation_results(FINAL)[0]) == {
        "accuracy": 0.9, "loss": 0.1, "precision[0]": 0.7, "precision[1]": 0.8}


@pytest.mark.parametrize(("metric", "final", "words"), [
    ("precision_delta", FINAL, "'precision' is a list of 2 values: name one, as "
                               "precision_delta[0]"),
    ("recall", FINAL, "did not report 'recall' for the new model (it reported: accuracy, "
                      "loss, precision)"),
    ("accuracy[0]", FINAL, "'accuracy' is a single number, not a list"),
    ("precision[2]", FINAL, "has no element 2"),
    ("accuracy", {"0/accuracy": 0.9}, "reported metrics for 1 model(s); it must report both"),
    ("accuracy", {"accuracy": 0.9}, "reported metrics for 0 model(s)"),
])
def test_metrics_that_cannot_answer_are_errors_never_a_silent_zero(
        metric: str, final: dict[str, float], words: str) -> None:
    with pytest.raises(triggers.MetricError) as exc:
        value(metric, final)
    assert words in str(exc.value)


def test_a_verdict_says_the_rule_the_value_and_the_outcome() -> None:
    v = triggers.judge("accuracy_delta", "gt", 0.02, 0.031)
    assert v.passed and v.rule == "accuracy_delta > 0.02: 0.031 holds"
    assert triggers.judge("accuracy", "<", 0.5, 0.7).rule == "accuracy < 0.5: 0.7 does not hold"


def test_each_batch_is_split_by_train_prob_rounding_down() -> None:
    pool = samples.split(samples.Pool(), 10, 0.8)
    assert (pool.train, pool.evals) == (((0, 8),), ((8, 10),))
    pool = samples.split(pool, 15, 0.8)  # 5 new: 4 to training, joined to the waiting ones
    assert (pool.train, pool.evals, pool.num_of_samples) == (((0, 8), (10, 14)),
                                                             ((8, 10), (14, 15)), 12)
    assert samples.split(pool, 15, 0.8) == pool  # nothing new
    assert samples.train_share(100, 0.29) == 29 and samples.train_share(1, 0.8) == 0


def test_the_evaluation_set_is_the_last_five_versions() -> None:
    pool = samples.Pool()
    for total in range(2, 16, 2):  # seven batches of two
        pool = samples.split(pool, total, 0.5)
    assert pool.evals == ((5, 6), (7, 8), (9, 10), (11, 12), (13, 14))
    lines = [f"s{i}" for i in range(14)]
    assert samples.pick(lines, pool.evals) == ["s5", "s7", "s9", "s11", "s13"]


def test_a_round_takes_the_waiting_samples_and_a_failed_one_gives_them_back() -> None:
    pool = samples.split(samples.Pool(), 10, 0.5)
    rest, taken = samples.take_train(pool)
    assert rest.num_of_samples == 0 and samples.count(taken) == 5
    newer = samples.split(rest, 14, 0.5)
    back = samples.give_back(newer, taken)
    assert back.train == ((0, 5), (10, 12)) and back.num_of_samples == 7
    assert samples.Pool.of(back.split_upto, *back.to_json()) == back


def test_sednas_node_name_in_a_template_pins_its_job_to_that_node() -> None:
    serve = {**TEMPLATE, "spec": {"nodeName": "edge-1", "resource": {"pool_id": "edge"}}}
    spec = loopspec.parse(body(deploySpec={"template": serve})).spec
    assert spec.deploySpec.template is not None
    job = loopspec.job_body(spec.deploySpec.template, "serve")
    assert (job.spec.resource.node_name, job.spec.resource.pool_id) == ("edge-1", "edge")
    clash = {**TEMPLATE, "spec": {"nodeName": "edge-1", "resource": {"node_name": "edge-2"}}}
    assert "name two nodes" in refusal(body(deploySpec={"template": clash}))
    assert "node names are" in refusal(body(deploySpec={"template": {
        **TEMPLATE, "spec": {"nodeName": "edge 1"}}}))
