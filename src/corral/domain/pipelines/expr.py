"""The small expression language of a pipeline task's `when` condition.

A condition reads upstream tasks' final metrics and the pipeline's parameters, and says
whether the task runs:

    eval.accuracy >= 0.9 and params.mode == 'full'
    train[0].loss < train[1].loss or not (eval["val/loss"] > 0.5)

It is parsed by a recursive-descent parser over the grammar below (`parser.parse`) and
evaluated here by walking the tree; nothing is ever handed to Python's `eval`, and a
condition can do nothing but compute a value from the references it names.

    expr    := or
    or      := and ("or" and)*
    and     := not ("and" not)*
    not     := "not" not | compare
    compare := sum (("==" | "!=" | "<" | "<=" | ">" | ">=" | "in" | "not" "in") sum)*
    sum     := product (("+" | "-") product)*
    product := unary (("*" | "/" | "%") unary)*
    unary   := "-" unary | primary
    primary := NUMBER | STRING | "true" | "false" | "(" expr ")"
             | "[" (expr ("," expr)*)? "]" | ref
    ref     := NAME ("[" INT "]")? ("." NAME)* ("[" STRING "]")?

A chain of comparisons (`0 < x <= 1`) holds when each pair does, as in Python. A
reference is `params.NAME` (a pipeline parameter; one that reads as a number is a
number) or `TASK.METRIC` / `TASK[i].METRIC` (the final value of an upstream task's metric;
a metric whose name holds other characters is written `TASK["val/loss"]`).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable
from typing import Any

from corral.domain import errors

PARAMS = "params"


class BadExpression(errors.BadParameter):
    """The condition is not a valid expression."""


class EvalError(errors.CorralError):
    """The condition could not be evaluated."""


@dataclasses.dataclass(frozen=True)
class Ref:
    """What a reference names: a pipeline parameter (`task` is "params") or a metric of a
    task (of one item of it, when `item` is given)."""

    task: str
    item: int | None
    name: str

    def __str__(self) -> str:
        at = f"[{self.item}]" if self.item is not None else ""
        plain = re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*", self.name)
        return f"{self.task}{at}.{self.name}" if plain else f'{self.task}{at}["{self.name}"]'


# --- the tree -------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Literal:
    value: Any


@dataclasses.dataclass(frozen=True)
class Name:
    ref: Ref


@dataclasses.dataclass(frozen=True)
class ListOf:
    items: tuple[Node, ...]


@dataclasses.dataclass(frozen=True)
class Unary:
    op: str
    operand: Node


@dataclasses.dataclass(frozen=True)
class Binary:
    op: str
    left: Node
    right: Node


Node = Literal | Name | ListOf | Unary | Binary


@dataclasses.dataclass(frozen=True)
class Expression:
    """A parsed condition: its text, its tree, and the references it makes."""

    text: str
    tree: Node
    refs: tuple[Ref, ...]

    def evaluate(self, lookup: Callable[[Ref], Any]) -> bool:
        """The condition's value, reading each reference through `lookup` (which raises
        EvalError for one it cannot give)."""
        value = _eval(self.tree, lookup)
        if not isinstance(value, bool):
            raise EvalError(f"'{self.text}' is {_show(value)}, not true or false")
        return value


# --- evaluating -----------------------------------------------------------------------------


def _eval(node: Node, lookup: Callable[[Ref], Any]) -> Any:
    if isinstance(node, Literal):
        return node.value
    if isinstance(node, Name):
        return lookup(node.ref)
    if isinstance(node, ListOf):
        return [_eval(i, lookup) for i in node.items]
    if isinstance(node, Unary):
        value = _eval(node.operand, lookup)
        if node.op == "not":
            return not _bool(value, "not")
        return -_number(value, "-")
    if node.op in ("and", "or"):  # short-circuit, as a reader expects
        left = _bool(_eval(node.left, lookup), node.op)
        if left == (node.op == "or"):
            return left
        return _bool(_eval(node.right, lookup), node.op)
    return _binary(node.op, _eval(node.left, lookup), _eval(node.right, lookup))


def _binary(op: str, a: Any, b: Any) -> Any:
    if op == "==":
        return _same(a, b)
    if op == "!=":
        return not _same(a, b)
    if op in ("in", "not in"):
        if isinstance(b, list):
            found = any(_same(a, x) for x in b)
        elif isinstance(b, str) and isinstance(a, str):
            found = a in b
        else:
            raise EvalError(f"'{op}' needs a list or a string on its right, not {_show(b)}")
        return found if op == "in" else not found
    if op in ("<", "<=", ">", ">="):
        if not (isinstance(a, str) and isinstance(b, str)):
            a, b = _number(a, op), _number(b, op)
        return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]
    x, y = _number(a, op), _number(b, op)
    if op == "+":
        return x + y
    if op == "-":
        return x - y
    if op == "*":
        return x * y
    if y == 0:
        raise EvalError(f"division by zero in {_show(a)} {op} {_show(b)}")
    return x / y if op == "/" else math.fmod(x, y)


def _same(a: Any, b: Any) -> bool:
    if _is_number(a) and _is_number(b):
        return bool(a == b)
    return type(a) is type(b) and bool(a == b)


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _number(v: Any, op: str) -> float:
    if not _is_number(v):
        raise EvalError(f"'{op}' needs numbers, not {_show(v)}")
    return float(v)


def _bool(v: Any, op: str) -> bool:
    if not isinstance(v, bool):
        raise EvalError(f"'{op}' needs true or false, not {_show(v)}")
    return v


def _show(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return repr(v)
    if isinstance(v, list):
        return "a list"
    return f"{v:g}" if isinstance(v, float) else str(v)


def parameter_value(raw: str) -> Any:
    """A pipeline parameter as a condition sees it: a number when it reads as one."""
    try:
        number = float(raw)
    except ValueError:
        return raw
    return int(number) if re.fullmatch(r"[+-]?\d+", raw.strip()) else number
