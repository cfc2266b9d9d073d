"""Each job kind's state diagram in its docs page is its transition table in `domain/`.

The store moves a kind's rows only as its table allows (`store/kind_repo.move`), so the
table is the state machine; a diagram that drifts from it tells users of moves that
cannot happen, or hides ones that can.
"""

from __future__ import annotations

import enum
import pathlib
from collections.abc import Mapping

import pytest

from corral.domain import machines, notebooks
from corral.domain.incremental import states
from corral.domain.pipelines import status

DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs"

#: (page, the table's name as the page gives it, the table, the state rows are made in)
DIAGRAMS = [
    ("incremental-learning.md", "corral.domain.incremental.states.LOOP_TRANSITIONS",
     states.LOOP_TRANSITIONS, states.LOOP_START),
    ("incremental-learning.md", "corral.domain.incremental.states.ROUND_TRANSITIONS",
     states.ROUND_TRANSITIONS, states.ROUND_START),
    ("incremental-learning.md", "corral.domain.incremental.states.DEPLOY_TRANSITIONS",
     states.DEPLOY_TRANSITIONS, states.DEPLOY_START),
    ("pipelines.md", "corral.domain.pipelines.status.RUN_TRANSITIONS",
     status.RUN_TRANSITIONS, status.RUN_START),
    ("pipelines.md", "corral.domain.pipelines.status.ATTEMPT_TRANSITIONS",
     status.ATTEMPT_TRANSITIONS, status.ATTEMPT_START),
    ("notebooks.md", "corral.domain.notebooks.TRANSITIONS",
     notebooks.TRANSITIONS, notebooks.START),
]


def diagram(text: str, name: str) -> set[tuple[str, str]]:
    """The edges of the first mermaid diagram after `drawn from NAME` on a page."""
    assert f"drawn from {name}" in " ".join(text.split()), f"no diagram says it draws {name}"
    after = text.split(name, 1)[1]
    block = after.split("```mermaid", 1)[1].split("```", 1)[0]
    return {(src.strip(), dst.strip()) for src, dst in
            (line.split("-->") for line in block.splitlines() if "-->" in line)}


def edges(table: Mapping[enum.Enum, frozenset[enum.Enum]],
          start: enum.Enum) -> set[tuple[str, str]]:
    drawn = {(str(s.value), str(t.value)) for s, nxt in table.items() for t in nxt}
    drawn |= {("[*]", str(start.value))}
    return drawn | {(str(s.value), "[*]") for s in machines.ended(table)}


@pytest.mark.parametrize(("page", "name", "table", "start"), DIAGRAMS,
                         ids=[name.rsplit(".", 2)[-2] + "." + name.rsplit(".", 1)[-1]
                              for _, name, _, _ in DIAGRAMS])
def test_the_diagram_is_the_transition_table(page: str, name: str,
                                             table: machines.Table[enum.Enum],
                                             start: enum.Enum) -> None:
    assert diagram((DOCS / page).read_text(), name) == edges(table, start)


@pytest.mark.parametrize(("table", "start"), [(t, s) for _, _, t, s in DIAGRAMS])
def test_every_state_is_in_its_table_and_reached_from_the_start(
        table: machines.Table[enum.Enum], start: enum.Enum) -> None:
    assert set(table) == set(type(start))
    assert all(nxt <= set(table) for nxt in table.values())
    reached, todo = {start}, [start]
    while todo:
        for nxt in table[todo.pop()] - reached:
            reached.add(nxt)
            todo.append(nxt)
    assert reached == set(table)


def test_what_the_actions_check_is_what_the_table_allows() -> None:
    # a user's start, stop and delete are refused from a state the store would not move
    nb = notebooks.State
    stoppable, deletable = notebooks.STOPPABLE, notebooks.DELETABLE
    assert stoppable == {nb.STARTING, nb.RUNNING}
    assert deletable == set(nb) - {nb.DELETING}
    startable = notebooks.STARTABLE
    assert startable < machines.allowed_from(notebooks.TRANSITIONS, nb.STARTING)
    live = states.LIVE  # what a user may stop, and what the controller moves along
    assert live == machines.allowed_from(states.LOOP_TRANSITIONS, states.LoopState.STOPPED)
