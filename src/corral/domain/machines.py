"""What every state machine of corral shares: a table of which state may follow which.

A kind's states are an enum and its rules one table, `state -> states it may move to`,
in its own domain module (`jobs.TRANSITIONS`, `notebooks.TRANSITIONS`, ...). The store's
guarded writers take the state to move to and ask the table where it may come from, so
that no call site says it; each kind's docs page draws the table and a test checks both
agree.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import TypeVar

S = TypeVar("S", bound=enum.Enum)

#: state -> the states it may move to
Table = Mapping[S, frozenset[S]]


def allowed_from(table: Table[S], target: S) -> frozenset[S]:
    """Every state from which `target` may be entered."""
    return frozenset(s for s, nxt in table.items() if target in nxt)


def ended(table: Table[S]) -> frozenset[S]:
    """The states nothing follows."""
    return frozenset(s for s, nxt in table.items() if not nxt)
