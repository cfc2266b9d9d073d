"""The soak check (benchmarks/soak.py) still runs end to end, for jobs, pipelines, searches
and incremental-learning loops, and says FAIL when a job's (a run's, a trial's, a round's)
side effects show it ran twice, never ended or did not complete, or when a server exited
though nobody killed it."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

BENCHMARKS = pathlib.Path(__file__).resolve().parents[2] / "benchmarks"


def test_a_quick_soak_kills_and_freezes_the_server_and_every_job_runs_once(
        tmp_path: pathlib.Path) -> None:
    homes = tmp_path / "homes"
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / "soak.py"), "--quick", "--seed", "3",
         "--home-parent", str(homes)],
        capture_output=True, text=True, timeout=240, cwd=BENCHMARKS)

    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "PASS: 4 jobs through 3 faults; each ran once and completed" in proc.stdout
    assert any(w in proc.stdout for w in ("kill -9 server 0", "freeze server 0"))
    assert list(homes.iterdir()) == []  # its temporary home is gone


@pytest.mark.parametrize("kind", ["pipelines", "searches", "loops"])
def test_a_quick_soak_of_pipelines_searches_and_loops_runs_each_of_their_jobs_once(
        tmp_path: pathlib.Path, kind: str) -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / "soak.py"), "--quick", "--kind", kind,
         "--jobs", "1", "--faults", "2", "--seed", "3",
         "--home-parent", str(tmp_path / "homes")],
        capture_output=True, text=True, timeout=240, cwd=BENCHMARKS)

    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"PASS: 1 {kind} through 2 faults; each ran once and completed" in proc.stdout


def test_the_tally_names_each_job_that_did_not_run_exactly_once_and_complete(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import soak

    lines = ["start-0", "end-0", "start-1", "start-1", "end-1", "end-1", "start-2",
             "start-3", "end-3"]
    problems = soak.tally(lines, ["a", "b", "c", "d"],
                          ["Completed", "Completed", "Completed", "Failed"])

    assert problems == [
        "job 1 (b): started 2 time(s), ended 2 time(s), Completed",
        "job 2 (c): started 1 time(s), ended 0 time(s), Completed",
        "job 3 (d): started 1 time(s), ended 1 time(s), Failed",
    ]
    assert soak.tally(["start-0", "end-0"], ["a"], ["Completed"]) == []


def test_the_tally_of_pipelines_and_searches_names_each_run_not_run_exactly_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import soak

    once = [f"{edge}-p0{run}" for run in soak.PIPELINE_RUNS for edge in ("start", "end")]
    assert soak.runs_tally(once, ["a"], ["success"], "pipeline", "p",
                           soak.PIPELINE_RUNS, "success") == []
    twice = [*once, "start-p0-b--i=1", "end-p0-b--i=1"]
    assert soak.runs_tally([*twice, "start-s1--t=0"], ["a", "b"], ["success", "Failed"],
                           "pipeline", "p", soak.PIPELINE_RUNS, "success") == [
        "pipeline 0 (a): success; -b--i=1 started 2 time(s), ended 2 time(s)",
        "pipeline 1 (b): Failed; -a started 0 time(s), ended 0 time(s); -b--i=0 started 0 "
        "time(s), ended 0 time(s); -b--i=1 started 0 time(s), ended 0 time(s); -c started 0 "
        "time(s), ended 0 time(s)",
    ]
    trials = [f"{edge}-s0{t}" for t in soak.SEARCH_TRIALS for edge in ("start", "end")]
    assert soak.runs_tally(trials[:-1], ["s"], ["Completed"], "search", "s",
                           soak.SEARCH_TRIALS, "Completed") == [
        "search 0 (s): Completed; --t=3 started 1 time(s), ended 0 time(s)"]


def test_a_server_that_exits_by_itself_is_a_problem_found_and_is_started_again(
        monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> None:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import soak

    servers = soak.Servers(2, tmp_path / "home", {})
    started: list[int] = []
    monkeypatch.setattr(servers, "start", started.append)
    for i in (0, 1):  # server 0 exits with 3 by itself; server 1 was killed a moment ago
        servers.procs[i] = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
        servers.procs[i].wait()
    servers.killed[1] = float("inf")
    log: list[str] = []

    servers.tend(log)

    assert servers.exited == ["server 0 exited by itself (code 3); its log: server-0.log"]
    assert log == ["server 0 exited by itself, started again"]
    assert started == [0]


def test_the_tally_of_loops_names_rounds_not_promoted_jobs_not_run_once_and_strays(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import soak

    def rounds(*states: str) -> dict[str, object]:
        return {"rounds": [{"number": i, "state": s, "message": None}
                           for i, s in enumerate(states, 1)]}

    def ran(n: int, r: int, stage: str) -> list[str]:
        return [f"start-l{n}-r{r}-{stage}", f"end-l{n}-r{r}-{stage}"]

    good = [x for r in (1, 2) for stage in ("train", "eval") for x in ran(0, r, stage)]
    assert soak.loop_tally(good, [(0, "a", rounds("Promoted", "Promoted"))], ["done"]) == []
    lines = [*good, *ran(0, 2, "train"), "start-l1-r1-train", *ran(1, 3, "eval")]
    assert soak.loop_tally(lines, [(0, "a", rounds("Promoted", "Promoted")),
                                   (1, "b", rounds("Failed"))], ["done", "Training"]) == [
        "loop 0 (a): round 2 train started 2 time(s), ended 2 time(s)",
        "loop 1 (b): not done: Training; round 1 Failed: None; round 1 train started 1 "
        "time(s), ended 0 time(s); round 1 eval started 0 time(s), ended 0 time(s); jobs "
        "of a round it does not have: r3",
    ]


def test_with_a_ray_cluster_a_job_that_ran_on_this_machine_is_a_problem(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import soak

    lines = ["start-0", "where-3f2a", "end-0", "start-1", "where-local", "end-1"]
    summary = "the file outside corral: 2 starts, 2 ends; 1 on this machine, 1 on Ray nodes"
    assert soak.placement(lines, ray=False) == (summary, [])
    assert soak.placement(lines, ray=True) == (
        summary, ["1 job(s) ran on this machine, not on the Ray cluster"])
    assert soak.placement(["where-3f2a", "where-77b0"], ray=True)[1] == []
