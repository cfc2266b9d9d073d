"""The incremental-learning controller on SQLite and PostgreSQL, with a fake clock and its
jobs ended by the test: when rounds start, what they train and judge on, their verdicts,
deploys and their acknowledgements, failures and the loop's backoff."""

from __future__ import annotations

import datetime
import json
import pathlib
import shutil

import pytest

from corral.domain.incremental import samples
from corral.kinds.incremental import deploys, layout
from corral.store import db, kind_tables
from tests.integration import incremental_harness as h


@pytest.fixture
def w(store: db.Store, tmp_path: pathlib.Path) -> h.Harness:
    world = h.make(store, tmp_path)
    world.model("m")  # v1: the initial model
    world.dataset("stream")
    return world


def test_the_check_period_is_honoured_from_the_moment_the_condition_holds(
        w: h.Harness) -> None:
    w.create(h.spec(w.root))
    assert not w.tick()  # checked at once: nothing new
    w.tick(1)
    w.append("stream", [f"s{i}" for i in range(8)])  # 4 for training: the condition holds
    for _ in range(8):
        w.tick(1)  # 9 s after the first check: the next is due at 10 s
        assert w.rounds("loop") == []
    w.tick(1)
    (rnd,) = w.rounds("loop")
    assert (rnd.number, rnd.state, rnd.train_samples, rnd.eval_samples) == (1, "Training", 4, 4)
    assert json.loads(rnd.trigger) == {"num_of_samples": 4,
                                       "rule": "num_of_samples >= 4: 4 holds"}
    assert set(w.jobs_of("loop")) == {"round-1/train"}
    assert w.loop("loop").state == "Training"


def test_new_samples_are_split_and_the_evaluation_set_is_the_last_five_versions(
        w: h.Harness) -> None:
    w.create(h.spec(w.root, dataset={"name": "stream", "trainProb": 0.5}, trainSpec={
        "template": h.spec(w.root)["trainSpec"]["template"],
        "trigger": {"checkPeriodSeconds": 10, "condition": {
            "operator": ">=", "threshold": 12, "metric": "num_of_samples"}}}))
    w.tick()
    for batch in range(7):  # 7 checks, each finding 2 new samples: 1 to train, 1 to eval
        w.append("stream", [f"b{batch}-0", f"b{batch}-1"])
        w.tick(10)
    loop = w.loop("loop")
    pool = samples.Pool.of(loop.split_upto, loop.train_pending, loop.eval_versions)
    assert pool.num_of_samples == 7 and pool.split_upto == 14
    assert pool.evals == ((5, 6), (7, 8), (9, 10), (11, 12), (13, 14))
    w.act("loop", "trigger")
    w.tick()
    (rnd,) = w.rounds("loop")
    out = layout.Layout(str(w.root / "out"))
    train = pathlib.Path(out.train_index(1, "txt")).read_text()
    assert train.split() == [f"b{i}-0" for i in range(7)]
    evals = pathlib.Path(out.eval_index(1, "txt")).read_bytes()
    assert evals.decode().split() == [f"b{i}-1" for i in range(2, 7)]
    assert rnd.eval_hash == samples.content_hash(evals) and rnd.eval_samples == 5
    assert json.loads(rnd.trigger) == {"num_of_samples": 7, "manual": True, "by": "bob"}


def round_to_verdict(w: h.Harness, accuracy_new: float, accuracy_current: float) -> int:
    """Samples for a round, its train job done, its evaluation reporting these."""
    w.append("stream", [f"x{w.now}-{i}" for i in range(8)])
    w.settle(10)
    version = w.train_done("loop")
    w.settle(1)
    w.eval_done("loop", {"0/accuracy": accuracy_new, "1/accuracy": accuracy_current})
    w.settle(1)
    return version


def test_a_better_model_is_promoted_and_a_worse_one_rejected_with_the_rule(
        w: h.Harness) -> None:
    w.create(h.spec(w.root))
    w.tick()
    v2 = round_to_verdict(w, 0.9, 0.8)
    first = w.current_round("loop")
    assert (first.state, first.decision, first.new_version) == ("Promoted", "promote", v2)
    assert first.rule == "accuracy_delta > 0.01: 0.1 holds"
    assert json.loads(first.metrics_new or "") == {"accuracy": 0.9}
    assert w.alias("m") == v2
    v3 = round_to_verdict(w, 0.85, 0.9)
    second = w.current_round("loop")
    assert (second.state, second.decision) == ("Rejected", "reject")
    assert second.rule == "accuracy_delta > 0.01: -0.05 does not hold"
    assert (second.base_version, second.current_version) == (v2, v2)
    assert w.alias("m") == v2 and v3 == v2 + 1
    (move,) = w.history("m")
    assert (move.from_version, move.to_version, move.user_name) == (None, v2, "ann")
    assert move.reason.startswith("round 1 promoted it: accuracy_delta > 0.01")
    assert w.loop("loop").state == "Waiting"


def test_an_evaluation_that_cannot_answer_fails_the_round_with_the_reason(
        w: h.Harness) -> None:
    w.create(h.spec(w.root, deploySpec={"trigger": {"condition": {
        "operator": ">", "threshold": 0, "metric": "precision_delta"}}}))
    w.tick()
    round_to_verdict(w, 0.9, 0.8)  # reports accuracy, not precision
    rnd = w.current_round("loop")
    assert rnd.state == "Failed"
    assert rnd.message == ("its evaluation cannot be judged: the evaluation did not report "
                           "'precision' for the new model (it reported: accuracy)")
    # Its training samples wait for the next round.
    loop = w.loop("loop")
    assert samples.Pool.of(loop.split_upto, loop.train_pending, loop.eval_versions
                           ).num_of_samples == 4


def test_failed_rounds_back_off_and_max_failed_rounds_stops_the_loop(w: h.Harness) -> None:
    w.create(h.spec(w.root, maxFailedRounds=2))
    w.tick()
    w.append("stream", [f"s{i}" for i in range(8)])
    w.settle(10)
    w.end(w.current_round("loop").train_job_id or "", "Failed")
    w.settle(1)
    (first,) = w.rounds("loop")
    assert first.state == "Failed" and "ended Failed: worker-0: exit with 1" in (
        first.message or "")
    loop = w.loop("loop")
    assert loop.state == "Waiting" and loop.failed_rounds == 1
    assert loop.not_before == w.now + 10_000  # checkPeriodSeconds after the first failure
    w.settle(9)  # a check, but within the backoff
    assert len(w.rounds("loop")) == 1
    w.settle(10)
    second = w.current_round("loop")
    assert second.number == 2 and second.train_samples == 4  # the same samples again
    w.end(second.train_job_id or "", "Failed")
    w.settle(1)
    loop = w.loop("loop")
    assert loop.state == "Failed" and loop.failed_rounds == 2
    assert "2 round(s) failed in a row" in (loop.message or "")
    w.settle(100)
    assert len(w.rounds("loop")) == 2  # it stopped
    w.act("loop", "resume")
    w.settle(1)
    assert w.loop("loop").state == "Training" and len(w.rounds("loop")) == 3


def test_a_loop_on_a_dataset_that_holds_samples_takes_them_all_as_its_first_batch(
        w: h.Harness) -> None:
    w.dataset("full", [f"old{i}" for i in range(10)])
    w.create(h.spec(w.root, dataset={"name": "full", "trainProb": 0.8}))
    w.settle()
    (rnd,) = w.rounds("loop")  # at its first check: 8 >= 4
    assert (rnd.state, rnd.train_samples, rnd.eval_samples) == ("Training", 8, 2)


def test_a_train_job_that_cannot_be_submitted_fails_its_round_and_says_why(
        w: h.Harness) -> None:
    w.create(h.spec(w.root))
    w.tick()
    shutil.rmtree(w.root / "code")  # accepted at create; gone by the round
    w.append("stream", [f"s{i}" for i in range(8)])
    w.settle(10)
    (first,) = w.rounds("loop")
    assert first.state == "Failed"
    assert first.message == (f"its train job could not be submitted: algorithm.code_dir "
                             f"'{w.root / 'code'}' is not a directory")
    loop = w.loop("loop")
    assert (loop.state, loop.rounds, loop.failed_rounds) == ("Waiting", 1, 1)
    assert loop.not_before == w.now + 10_000
    assert samples.Pool.of(loop.split_upto, loop.train_pending, loop.eval_versions
                           ).num_of_samples == 4  # its samples wait for the next round
    assert any(e.startswith("Round 1 failed: its train job could not be submitted")
               for e in w.events("loop"))
    assert w.jobs_of("loop") == {}


def test_a_loop_whose_pass_fails_says_so_once_and_holds_no_other_back(w: h.Harness) -> None:
    w.create(h.spec(w.root), name="broken")
    w.create(h.spec(w.root), name="fine")
    with w.store.begin() as conn:  # a spec no version of corral could read
        conn.execute(kind_tables.il_loops.update().where(
            kind_tables.il_loops.c.name == "broken").values(spec="{}"))
    w.append("stream", [f"s{i}" for i in range(8)])
    for _ in range(3):
        w.tick(10)
    assert w.loop("fine").state == "Training"
    failed = [e for e in w.events("broken") if e.startswith("The controller's pass failed")]
    assert len(failed) == 1, failed  # said once, though every pass fails
    assert "ValidationError" in failed[0] and failed[0].endswith(
        "it is tried again at every pass (the server log has the details)")


@pytest.mark.parametrize(("start", "end", "hour", "minute", "opens"), [
    ("23:00", "01:00", 23, 30, True), ("23:00", "01:00", 0, 30, True),
    ("23:00", "01:00", 12, 0, False), ("23:00", "01:00", 1, 0, False),
    ("09:00", "17:00", 12, 0, True), ("09:00", "17:00", 8, 59, False)])
def test_a_train_timer_window_wraps_midnight_in_local_time(
        w: h.Harness, start: str, end: str, hour: int, minute: int, opens: bool) -> None:
    w.now = int(datetime.datetime(2026, 3, 2, hour, minute).timestamp() * 1000)
    template = h.spec(w.root)["trainSpec"]
    w.create(h.spec(w.root, trainSpec={**template, "trigger": {
        **template["trigger"], "timer": {"start": start, "end": end}}}))
    w.append("stream", [f"s{i}" for i in range(8)])
    w.tick()
    assert (len(w.rounds("loop")) == 1) is opens


def test_a_deploy_waits_for_the_services_acknowledgement(w: h.Harness) -> None:
    w.create(h.spec(w.root, deploy_template=True))
    w.tick()
    first = w.deploys("loop")[0]
    assert (first.state, first.service_role, first.moves_alias) == ("Pending", "serve-1",
                                                                    False)
    out = layout.Layout(str(w.root / "out"))
    config = json.loads(pathlib.Path(out.config).read_text())["model_config"]
    assert config["model_path"] == out.deployed("m", 1)
    assert (pathlib.Path(out.deployed("m", 1)) / "model.json").exists()
    ack(out, config["model_update_time"])
    w.settle()
    assert w.deploys("loop")[0].state == "Loaded"
    v2 = round_to_verdict(w, 0.9, 0.8)
    rnd = w.current_round("loop")
    assert rnd.state == "Deploying" and w.alias("m") is None  # not yet acknowledged
    second = w.deploys("loop")[-1]
    assert (second.state, second.service_role, second.round) == ("Pending", "serve-1", 1)
    config = json.loads(pathlib.Path(out.config).read_text())["model_config"]
    assert config["model_path"] == out.deployed("m", v2)
    ack(out, config["model_update_time"])
    w.settle(1)
    assert w.current_round("loop").state == "Promoted" and w.alias("m") == v2
    assert set(w.jobs_of("loop")) == {"serve-1", "round-1/train", "round-1/eval"}


def test_a_deploy_not_acknowledged_in_time_fails_its_round_and_restores_the_config(
        w: h.Harness) -> None:
    w.create(h.spec(w.root, deploy_template=True))
    w.tick()
    out = layout.Layout(str(w.root / "out"))
    before = pathlib.Path(out.config).read_text()
    ack(out, json.loads(before)["model_config"]["model_update_time"])
    w.settle()
    round_to_verdict(w, 0.9, 0.8)
    assert pathlib.Path(out.config).read_text() != before
    w.settle(21)  # ackTimeoutSeconds is 20
    rnd = w.current_round("loop")
    assert rnd.state == "Failed"
    assert rnd.message == ("its deploy failed: the service did not acknowledge loading it "
                           "within 20 s")
    assert w.alias("m") is None and pathlib.Path(out.config).read_text() == before
    assert w.deploys("loop")[-1].state == "Failed"


def ack(out: layout.Layout, token: str, status: str = "loaded") -> None:
    pathlib.Path(out.ack).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(out.ack).write_text(json.dumps({"model_update_time": token, "status": status}))


def test_a_forced_promotion_and_a_rollback_move_the_alias_with_their_reasons(
        w: h.Harness) -> None:
    w.create(h.spec(w.root))
    w.tick()
    v2 = round_to_verdict(w, 0.9, 0.8)
    v3 = round_to_verdict(w, 0.5, 0.9)  # rejected
    assert w.act("loop", "promote", reason="field data says so", version=None) == v3
    w.settle()
    assert w.alias("m") == v3
    assert w.act("loop", "rollback", reason="") == v2
    w.settle()
    assert w.alias("m") == v2
    moves = [(m.from_version, m.to_version, m.user_name, m.reason) for m in w.history("m")]
    assert moves[1:] == [(v2, v3, "bob", "forced by bob: field data says so"),
                         (v3, v2, "bob", "rollback by bob")]


def test_hot_update_config_names_the_deployed_copy_and_superseded_deploys_are_kept(
        w: h.Harness) -> None:
    w.create(h.spec(w.root, deploy_template=True))
    w.tick()
    # A second deploy before the first was acknowledged replaces it.
    w.act("loop", "promote", reason="now", version=1)
    (first, second) = w.deploys("loop")
    assert (first.state, second.state) == ("Superseded", "Writing")
    w.settle()
    assert deploys.config(layout.Layout(str(w.root / "out")), w.deploys("loop")[1]
                          ).decode() == (w.root / "out" / "deploy" / "model_config.json"
                                         ).read_text()


def test_hard_examples_the_service_writes_become_new_samples(w: h.Harness) -> None:
    w.create(h.spec(w.root, deploy_template=True, deploySpec={
        **h.spec(w.root, deploy_template=True)["deploySpec"],
        "hardExampleMining": {"name": "IBT", "parameters": [{"key": "threshold", "value": 0.9}]}}))
    w.tick()
    job = w.job_row(w.jobs_of("loop")["serve-1"].id)
    from corral.store import job_repo

    env = job_repo.job_spec(job).algorithm.environments
    assert (env["HEM_NAME"], env["HEM_PARAMETERS"]) == ("IBT", '{"threshold": "0.9"}')
    hard = pathlib.Path(env["HARD_EXAMPLES_FILE"])
    hard.parent.mkdir(parents=True)
    hard.write_text("h1\nh2\nh3-half")  # the last line is not complete yet
    w.tick()
    assert (w.root / "stream.txt").read_text().split() == ["h1", "h2"]
    with hard.open("a") as fh:
        fh.write("\n")
    w.tick()
    assert (w.root / "stream.txt").read_text().split() == ["h1", "h2", "h3-half"]
    hard.write_text("h4\n")  # the service started its file again
    w.tick()
    assert (w.root / "stream.txt").read_text().split()[-1] == "h4"
    assert any("hard example(s) from the service added" in e for e in w.events("loop"))


def test_a_link_planted_under_output_dir_is_refused_not_followed(
        w: h.Harness, tmp_path: pathlib.Path) -> None:
    w.create(h.spec(w.root))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (w.root / "out" / "rounds").symlink_to(elsewhere)
    w.tick()
    w.append("stream", [f"s{i}" for i in range(8)])
    w.settle(10)
    (rnd,) = w.rounds("loop")
    assert rnd.state == "Failed" and "cannot be written under outputDir" in (rnd.message or "")
    assert list(elsewhere.iterdir()) == []
    # outputDir itself swapped for a link: refused wherever it leads
    (w.root / "out" / "rounds").unlink()
    (w.root / "out").rename(w.root / "out-real")
    (w.root / "out").symlink_to(w.root / "out-real")
    w.settle(20)
    second = w.current_round("loop")
    assert second.number == 2 and "a link was put in its way" in (second.message or "")


def test_a_dataset_in_object_storage_is_counted_appended_to_and_read(
        store: db.Store, tmp_path: pathlib.Path) -> None:
    from tests import s3

    server = s3.start()
    try:
        bucket = server.bucket()
        server.put(bucket, "data/stream.txt", b"0.1\n0.2\n")
        w = h.make(store, tmp_path, s3=server.config)
        w.model("m")
        w.dataset("stream", url=f"s3://{bucket}/data/stream.txt")
        assert w.append("stream", ["0.3", "0.4"]) == 4
        assert server.get(bucket, "data/stream.txt") == b"0.1\n0.2\n0.3\n0.4\n"
        w.create(h.spec(w.root, trainSpec={**h.spec(w.root)["trainSpec"], "trigger": {
            "condition": {"operator": ">=", "threshold": 2, "metric": "num_of_samples"}}}))
        w.tick()
        (rnd,) = w.rounds("loop")
        out = layout.Layout(str(w.root / "out"))
        assert pathlib.Path(out.train_index(1, "txt")).read_text().split() == ["0.1", "0.2"]
        assert pathlib.Path(out.eval_index(1, "txt")).read_text().split() == ["0.3", "0.4"]
        assert rnd.train_samples == 2
    finally:
        server.stop()


def test_a_round_asked_for_starts_at_once_and_keeps_the_checks_rhythm(w: h.Harness) -> None:
    w.create(h.spec(w.root))
    w.tick()  # checked at once; the next check is due 10 s later
    w.act("loop", "trigger")
    w.tick(1)  # nothing new yet: no round, and the events say why
    assert w.rounds("loop") == []
    assert w.events("loop")[-1].startswith("Round asked for by bob not started: no new "
                                           "training samples")
    w.append("stream", ["a", "b"])  # 1 for training: short of the condition's 4
    w.tick(2)
    w.act("loop", "trigger")
    w.tick()
    (rnd,) = w.rounds("loop")
    assert json.loads(rnd.trigger) == {"num_of_samples": 1, "manual": True, "by": "bob"}
    assert w.loop("loop").next_check_at == w.loop("loop").created_at + 10_000
