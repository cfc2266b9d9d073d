"""The graph of a pipeline's tasks: checked once at submit, then walked in order.

A dependency on a task that does not exist, or a cycle, is refused with its path
(`train -> eval -> train`), so that what is accepted always has an order to run in.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence

from corral.domain import errors


class BadGraph(errors.BadParameter):
    """The tasks' dependencies do not form a graph without cycles."""


def check(deps: Mapping[str, Sequence[str]]) -> list[str]:
    """The tasks in an order where each comes after those it depends on (and, among those
    free to come next, in the order they were written); BadGraph for a name that is not a
    task or for a cycle, naming its path."""
    names = list(deps)
    for task, upstream in deps.items():
        for dep in upstream:
            if dep not in deps:
                near = difflib.get_close_matches(dep, names, n=1)
                hint = f" (did you mean '{near[0]}'?)" if near else ""
                raise BadGraph(f"task '{task}' depends on '{dep}', which is not a task of "
                               f"the pipeline{hint}")
            if dep == task:
                raise BadGraph(f"task '{task}' depends on itself")
    cycle = find_cycle(deps)
    if cycle:
        raise BadGraph(f"the tasks' dependencies make a cycle: {' -> '.join(cycle)}")
    return order(deps)


def find_cycle(deps: Mapping[str, Sequence[str]]) -> list[str]:
    """A cycle as the path that closes it (`a -> b -> a`, each depending on the next), or
    [] when there is none."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in deps:
        if state.get(start):
            continue
        path: list[str] = [start]
        stack = [iter(deps[start])]
        state[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
                continue
            if state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            if not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(deps.get(nxt, ())))
    return []


def order(deps: Mapping[str, Sequence[str]]) -> list[str]:
    """Kahn's order, ties broken by the order the tasks were written in (no cycles)."""
    left = {t: set(d) for t, d in deps.items()}
    out: list[str] = []
    while left:
        ready = [t for t, d in left.items() if not d]
        if not ready:
            raise BadGraph("the tasks' dependencies make a cycle")
        for t in ready:
            out.append(t)
            del left[t]
        for d in left.values():
            d.difference_update(ready)
    return out


def ancestors(deps: Mapping[str, Sequence[str]], task: str) -> set[str]:
    """Every task `task` depends on, directly or through others."""
    seen: set[str] = set()
    todo = list(deps.get(task, ()))
    while todo:
        t = todo.pop()
        if t not in seen:
            seen.add(t)
            todo.extend(deps.get(t, ()))
    return seen


def downstream(deps: Mapping[str, Sequence[str]], task: str) -> set[str]:
    """`task` and every task that depends on it, directly or through others."""
    below: dict[str, list[str]] = {t: [] for t in deps}
    for t, ups in deps.items():
        for u in ups:
            below[u].append(t)
    seen = {task}
    todo = [task]
    while todo:
        for t in below[todo.pop()]:
            if t not in seen:
                seen.add(t)
                todo.append(t)
    return seen
