"""The job state machine as a table: which phase may follow which."""

from __future__ import annotations

import pytest

from corral.domain import jobs

Phase = jobs.Phase


def test_every_phase_has_a_row_in_the_table() -> None:
    assert set(jobs.TRANSITIONS) == set(Phase)


def test_every_target_is_a_known_phase() -> None:
    for nexts in jobs.TRANSITIONS.values():
        assert nexts <= set(Phase)


def test_terminal_phases_are_completed_failed_terminated_abnormal() -> None:
    assert {Phase.COMPLETED, Phase.FAILED, Phase.TERMINATED, Phase.ABNORMAL} == jobs.TERMINAL


@pytest.mark.parametrize("phase", sorted(jobs.TERMINAL))
def test_a_terminal_phase_has_no_way_out(phase: Phase) -> None:
    assert jobs.TRANSITIONS[phase] == frozenset()


def test_no_phase_moves_to_itself() -> None:
    for phase, nexts in jobs.TRANSITIONS.items():
        assert phase not in nexts


def test_terminating_only_leads_to_terminated() -> None:
    assert jobs.TRANSITIONS[Phase.TERMINATING] == {Phase.TERMINATED}


def test_only_terminating_leads_to_terminated() -> None:
    # A job is Terminated only after its processes were stopped.
    assert jobs.allowed_from(Phase.TERMINATED) == {Phase.TERMINATING}


def test_a_job_can_be_terminated_while_creating_pending_or_running() -> None:
    assert {Phase.CREATING, Phase.PENDING, Phase.RUNNING} == jobs.TERMINABLE


@pytest.mark.parametrize("target", list(Phase))
def test_allowed_from_is_the_inverse_of_the_table(target: Phase) -> None:
    expected = {p for p, nexts in jobs.TRANSITIONS.items() if target in nexts}
    assert jobs.allowed_from(target) == expected


def test_nothing_leads_back_to_creating() -> None:
    assert jobs.allowed_from(Phase.CREATING) == frozenset()


def test_a_running_job_may_go_back_to_the_queue() -> None:
    assert Phase.PENDING in jobs.TRANSITIONS[Phase.RUNNING]


def test_every_non_terminal_phase_can_reach_a_terminal_one() -> None:
    for start in Phase:
        seen, todo = {start}, [start]
        while todo:
            for nxt in jobs.TRANSITIONS[todo.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        assert seen & jobs.TERMINAL, f"{start} never ends"


def test_active_phases_hold_resources_and_are_not_terminal() -> None:
    assert {Phase.RUNNING, Phase.TERMINATING} == jobs.ACTIVE
    assert not jobs.ACTIVE & jobs.TERMINAL


def test_task_done_states_are_the_ended_ones() -> None:
    done = {jobs.TaskState.EXITED, jobs.TaskState.LOST, jobs.TaskState.NODE_LOST,
            jobs.TaskState.FAILED_TO_START}
    assert done == jobs.TASK_DONE
    assert jobs.TaskState.LAUNCHING not in jobs.TASK_DONE
    assert jobs.TaskState.RUNNING not in jobs.TASK_DONE


def test_exit_reason_reads_as_modelarts_writes_it() -> None:
    assert jobs.exit_reason(3) == "exit with 3"


def test_task_names_count_from_zero() -> None:
    assert jobs.task_names(3) == ["worker-0", "worker-1", "worker-2"]
