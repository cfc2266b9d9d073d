"""A trial's states, as data, and how its reward is read from a line of its log.

A trial is an ordinary training job the search owns. It runs until its job ends; a trial
asked to stop (by the pruner, by hand, with its search) is `stopping` until its job has
ended, and then ends as what asked.
"""

from __future__ import annotations

import enum
import re


class State(enum.StrEnum):
    RUNNING = "running"  #: its job is submitted (queued or running)
    STOPPING = "stopping"  #: asked to stop (`stop_cause` says by what); its job ends
    COMPLETED = "completed"  #: its job completed; its reward is final
    FAILED = "failed"  #: its job failed, or it reported no reward
    PRUNED = "pruned"  #: stopped early by the algorithm: its reward fell behind
    EARLY_STOPPED = "early_stopped"  #: stopped early by hand (the early-stop call)
    STOPPED = "stopped"  #: stopped with its search


class StopCause(enum.StrEnum):
    PRUNED = "pruned"
    BY_HAND = "early_stopped"
    SEARCH = "stopped"


TRANSITIONS: dict[State, frozenset[State]] = {
    State.RUNNING: frozenset({State.STOPPING, State.COMPLETED, State.FAILED}),
    State.STOPPING: frozenset({State.PRUNED, State.EARLY_STOPPED, State.STOPPED,
                               State.COMPLETED, State.FAILED}),
    State.COMPLETED: frozenset(),
    State.FAILED: frozenset(),
    State.PRUNED: frozenset(),
    State.EARLY_STOPPED: frozenset(),
    State.STOPPED: frozenset(),
}
ENDED: frozenset[State] = frozenset(s for s, nxt in TRANSITIONS.items() if not nxt)
LIVE: frozenset[State] = frozenset(TRANSITIONS) - ENDED
#: ended trials whose reward counts towards the best (a stopped trial's reward is its
#: last intermediate one, which is what the pruner compared)
REWARDED: frozenset[State] = frozenset({State.COMPLETED})


def stop_state(cause: StopCause) -> State:
    """What a trial stopped for `cause` ends as, once its job has ended."""
    return State(cause.value)


def reward_in(pattern: re.Pattern[str], line: str) -> float | None:
    """The reward a log line says by `pattern`: its group if it has one, else the whole
    match; None where it says none (no match, or not a number)."""
    found = pattern.search(line)
    if found is None:
        return None
    text = found.group(1) if pattern.groups else found.group(0)
    try:
        value = float(text.strip())
    except ValueError:
        return None
    return value if value == value and abs(value) != float("inf") else None
