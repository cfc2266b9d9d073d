"""A pipeline checked: its graph in order, and what each task takes from which other.

`check` refuses a body whose graph has a cycle or a missing name (with its path), and a
reference to anything that does not exist or that the task could not wait for: an input
`from` an output channel its upstream task lacks, a metric of a task it does not depend
on, an item of a task that does not fan out, a parameter the pipeline does not have. What
it returns is what the controller walks: the tasks in order, each with its references.

Runs: each task runs once per attempt of the pipeline, or once per item when it fans out
(`for_each`). A run is named by its key, `train` or `train[1]`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping

from corral.domain import errors
from corral.domain.pipelines import dag, expr, parser, spec, status

_CHANNEL_REF = re.compile(r"^(?P<task>[A-Za-z_][A-Za-z0-9_]*)(?:\[(?P<item>\d+)\])?"
                          r"\.outputs\.(?P<channel>[A-Za-z_][A-Za-z0-9_-]*)\Z")
_METRIC_REF = re.compile(r"^(?P<task>[A-Za-z_][A-Za-z0-9_]*)(?:\[(?P<item>\d+)\])?"
                         r"\.(?P<metric>[A-Za-z0-9_.:/-]{1,128})\Z")
_RUN_KEY = re.compile(r"^(?P<task>[A-Za-z_][A-Za-z0-9_]*)(?:\[(?P<item>\d+)\])?\Z")


class BadReference(errors.BadParameter):
    """A task refers to something the pipeline does not have."""


@dataclasses.dataclass(frozen=True)
class Channel:
    """An upstream task's output channel, as an input names it."""

    task: str
    item: int | None
    channel: str

    def __str__(self) -> str:
        return f"{run_key(self.task, self.item)}.outputs.{self.channel}"


@dataclasses.dataclass(frozen=True)
class TaskShape:
    task: spec.Task
    when: expr.Expression | None
    #: input channel -> the upstream output channel it is given
    inputs: Mapping[str, Channel]
    #: parameter -> the upstream metric it is given
    metrics: Mapping[str, expr.Ref]
    #: tasks whose outputs or metrics it takes: it never starts before they have ended
    takes_from: frozenset[str]
    #: tasks whose metrics it reads: it waits until their final metrics are read
    reads_metrics: frozenset[str]

    @property
    def name(self) -> str:
        return self.task.name

    @property
    def rule(self) -> status.Rule:
        return self.task.rule


@dataclasses.dataclass(frozen=True)
class Shape:
    body: spec.PipelineCreate
    #: task names, each after those it depends on
    order: tuple[str, ...]
    tasks: Mapping[str, TaskShape]

    def runs(self) -> list[tuple[str, str, int | None]]:
        """(key, task, item) of every run of an attempt, in order."""
        out: list[tuple[str, str, int | None]] = []
        for name in self.order:
            count = self.tasks[name].task.items
            if count is None:
                out.append((name, name, None))
            else:
                out.extend((run_key(name, i), name, i) for i in range(count))
        return out

    def upstream_keys(self, task: str) -> list[str]:
        """The keys of every run of the tasks `task` depends on."""
        return [k for dep in self.tasks[task].task.depends_on for k in self.keys_of(dep)]

    def keys_of(self, task: str) -> list[str]:
        count = self.tasks[task].task.items
        return [task] if count is None else [run_key(task, i) for i in range(count)]

    def item_of(self, task: str, item: int | None, wanted: int | None) -> str:
        """The run of `task` that a reference from item `item` of another task means:
        the item it names, the same item (both fan out alike), or the task's one run."""
        if wanted is not None:
            return run_key(task, wanted)
        if self.tasks[task].task.items is not None:
            return run_key(task, item)
        return task

    def deps(self) -> dict[str, list[str]]:
        return {n: list(t.task.depends_on) for n, t in self.tasks.items()}


def run_key(task: str, item: int | None) -> str:
    return task if item is None else f"{task}[{item}]"


def split_key(key: str) -> tuple[str, int | None]:
    """(task, item) of a run key or of a task named with an item (`train[0]`)."""
    m = _RUN_KEY.match(key)
    if m is None:
        raise BadReference(f"'{key}' is not a task, or a task's item (train[0])")
    return m["task"], None if m["item"] is None else int(m["item"])


def check(body: spec.PipelineCreate) -> Shape:
    """The pipeline's shape, or BadParameter saying what is wrong where."""
    names = [t.name for t in body.tasks]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise BadReference(f"two tasks are named '{twice[0]}'")
    by_name = {t.name: t for t in body.tasks}
    deps = {t.name: list(dict.fromkeys(t.depends_on)) for t in body.tasks}
    order = dag.check(deps)
    for t in body.tasks:
        late = [d for d in t.depends_on if by_name[d].finally_]
        if late and not t.finally_:
            raise BadReference(f"task '{t.name}' depends on '{late[0]}', a `finally` task: "
                               "only `finally` tasks may")
    runs = sum(t.items or 1 for t in body.tasks)
    if runs > spec.MAX_RUNS:
        raise BadReference(f"the pipeline has {runs} task runs (items counted); at most "
                           f"{spec.MAX_RUNS}")
    tasks = {t.name: _task(body, t, by_name, deps) for t in body.tasks}
    shape = Shape(body=body, order=tuple(order), tasks=tasks)
    if body.model is not None:
        _check_model(body.model, by_name)
    return shape


def _task(body: spec.PipelineCreate, t: spec.Task, by_name: Mapping[str, spec.Task],
          deps: Mapping[str, list[str]]) -> TaskShape:
    before = dag.ancestors(deps, t.name)
    if t.finally_:  # a finally task waits for every other task
        before |= {n for n, other in by_name.items() if not other.finally_}
    where = f"task '{t.name}'"
    inputs = {}
    for ch in t.algorithm.inputs:
        if ch.from_ is not None:
            inputs[ch.name] = ref = _channel(ch.from_, f"{where}, input '{ch.name}'")
            _upstream(ref.task, ref.item, t, by_name, before, f"{where}, input '{ch.name}'")
            if ref.channel not in {o.name for o in by_name[ref.task].algorithm.outputs}:
                raise BadReference(f"{where}, input '{ch.name}': task '{ref.task}' has no "
                                   f"output channel '{ref.channel}'")
    metrics = {}
    for p in t.algorithm.parameters:
        what = f"{where}, parameter '{p.name}'"
        if p.param is not None and p.param not in body.parameters:
            raise BadReference(f"{what}: the pipeline has no parameter '{p.param}'")
        if p.metric is not None:
            metrics[p.name] = m = _metric(p.metric, what)
            _upstream(m.task, m.item, t, by_name, before, what)
    when = None
    if t.when is not None:
        when = parser.parse(t.when)
        for r in when.refs:
            if r.task == expr.PARAMS:
                if r.name not in body.parameters:
                    raise BadReference(f"{where}, when: the pipeline has no parameter "
                                       f"'{r.name}'")
            else:
                _upstream(r.task, r.item, t, by_name, before, f"{where}, when")
    read = {m.task for m in metrics.values()}
    if when is not None:
        read |= {r.task for r in when.refs if r.task != expr.PARAMS}
    return TaskShape(task=t, when=when, inputs=inputs, metrics=metrics,
                     takes_from=frozenset(read | {c.task for c in inputs.values()}),
                     reads_metrics=frozenset(read))


def _channel(text: str, what: str) -> Channel:
    m = _CHANNEL_REF.match(text)
    if m is None:
        raise BadReference(f"{what}: `from: {text}` is not TASK.outputs.CHANNEL")
    return Channel(task=m["task"], item=None if m["item"] is None else int(m["item"]),
                   channel=m["channel"])


def _metric(text: str, what: str) -> expr.Ref:
    m = _METRIC_REF.match(text)
    if m is None:
        raise BadReference(f"{what}: `metric: {text}` is not TASK.METRIC")
    return expr.Ref(task=m["task"], item=None if m["item"] is None else int(m["item"]),
                    name=m["metric"])


def _upstream(task: str, item: int | None, me: spec.Task, by_name: Mapping[str, spec.Task],
              before: set[str], what: str) -> None:
    """A reference from `me` to `task` (item `item`) is one it can wait for."""
    if task not in by_name:
        raise BadReference(f"{what}: '{task}' is not a task of the pipeline")
    if task not in before:
        raise BadReference(f"{what}: task '{me.name}' does not depend on '{task}' (add it "
                           "to depends_on)")
    count = by_name[task].items
    if item is not None and count is None:
        raise BadReference(f"{what}: task '{task}' does not fan out; name it without [{item}]")
    if item is not None and count is not None and item >= count:
        raise BadReference(f"{what}: task '{task}' has items 0 to {count - 1}")
    if item is None and count is not None and me.items != count:
        raise BadReference(f"{what}: task '{task}' fans out into {count} items: name one "
                           f"({task}[0]), or fan '{me.name}' out over as many")


def _check_model(model: spec.ModelSave, by_name: Mapping[str, spec.Task]) -> None:
    task, item = split_key(model.task)
    what = f"model: task '{model.task}'"
    if task not in by_name:
        raise BadReference(f"model: '{task}' is not a task of the pipeline")
    count = by_name[task].items
    if count is not None and (item is None or item >= count):
        raise BadReference(f"{what} fans out into {count} items: name one ({task}[0])")
    if count is None and item is not None:
        raise BadReference(f"{what}: '{task}' does not fan out")
    if model.channel not in {o.name for o in by_name[task].algorithm.outputs}:
        raise BadReference(f"{what} has no output channel '{model.channel}'")
