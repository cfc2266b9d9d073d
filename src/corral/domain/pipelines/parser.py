"""The parser of `when` conditions (the grammar is in `expr`): tokens, then recursive
descent, each rule a method; a condition that does not parse is refused saying where."""

from __future__ import annotations

import re
from collections.abc import Iterator

from corral.domain.pipelines import expr

#: the longest condition accepted, and how deeply it may nest
MAX_LENGTH = 1000
MAX_DEPTH = 40

_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<number>\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)
  | (?P<string>'[^'\\]*(?:\\.[^'\\]*)*'|"[^"\\]*(?:\\.[^"\\]*)*")
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>==|!=|<=|>=|[<>+\-*/%()\[\],.])
""", re.VERBOSE)
_KEYWORDS = {"and", "or", "not", "in", "true", "false"}
_COMPARE = {"==", "!=", "<", "<=", ">", ">=", "in", "not in"}


def parse(text: str) -> expr.Expression:
    """The condition as a tree, or expr.BadExpression saying where it goes wrong."""
    if len(text) > MAX_LENGTH:
        raise expr.BadExpression(f"a condition is at most {MAX_LENGTH} characters")
    parser = _Parser(text, list(_tokens(text)))
    tree = parser.expression(0)
    if parser.peek() is not None:
        parser.fail("unexpected")
    refs: list[expr.Ref] = []
    _collect(tree, refs)
    return expr.Expression(text=text, tree=tree, refs=tuple(dict.fromkeys(refs)))


def _tokens(text: str) -> Iterator[tuple[str, str, int]]:
    """(kind, text, position) of each token: number, string, name, keyword or op."""
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise expr.BadExpression(f"'{text}': unexpected character {text[pos]!r} at {pos + 1}")
        kind = m.lastgroup or ""
        if kind != "space":
            word = m.group()
            yield ("keyword" if kind == "name" and word in _KEYWORDS else kind), word, pos
        pos = m.end()


class _Parser:
    def __init__(self, text: str, tokens: list[tuple[str, str, int]]) -> None:
        self.text, self.tokens, self.i = text, tokens, 0

    def peek(self, ahead: int = 0) -> tuple[str, str, int] | None:
        j = self.i + ahead
        return self.tokens[j] if j < len(self.tokens) else None

    def at(self, word: str, ahead: int = 0) -> bool:
        tok = self.peek(ahead)
        return tok is not None and tok[0] in ("op", "keyword") and tok[1] == word

    def take(self) -> tuple[str, str, int]:
        tok = self.peek()
        if tok is None:
            self.fail("ends early")
        self.i += 1
        assert tok is not None
        return tok

    def expect(self, word: str) -> None:
        if not self.at(word):
            self.fail(f"expected '{word}'")
        self.i += 1

    def fail(self, why: str) -> None:
        tok = self.peek()
        where = f"at '{tok[1]}' ({tok[2] + 1})" if tok else "at the end"
        raise expr.BadExpression(f"'{self.text}': {why} {where}")

    def expression(self, depth: int) -> expr.Node:
        if depth > MAX_DEPTH:
            self.fail("nested too deeply")
        return self._or(depth + 1)

    def _or(self, d: int) -> expr.Node:
        node = self._and(d)
        while self.at("or"):
            self.i += 1
            node = expr.Binary("or", node, self._and(d))
        return node

    def _and(self, d: int) -> expr.Node:
        node = self._not(d)
        while self.at("and"):
            self.i += 1
            node = expr.Binary("and", node, self._not(d))
        return node

    def _not(self, d: int) -> expr.Node:
        if self.at("not") and not self.at("in", 1):
            self.i += 1
            if d > MAX_DEPTH:
                self.fail("nested too deeply")
            return expr.Unary("not", self._not(d + 1))
        return self._compare(d)

    def _compare(self, d: int) -> expr.Node:
        """`a < b <= c` means `a < b and b <= c`, as in Python."""
        left = self._sum(d)
        node: expr.Node | None = None
        while True:
            if self.at("not") and self.at("in", 1):
                self.i += 2
                op = "not in"
            elif any(self.at(w) for w in _COMPARE):
                op = self.take()[1]
            else:
                return left if node is None else node
            right = self._sum(d)
            pair = expr.Binary(op, left, right)
            node = pair if node is None else expr.Binary("and", node, pair)
            left = right

    def _sum(self, d: int) -> expr.Node:
        node = self._product(d)
        while self.at("+") or self.at("-"):
            op = self.take()[1]
            node = expr.Binary(op, node, self._product(d))
        return node

    def _product(self, d: int) -> expr.Node:
        node = self._unary(d)
        while self.at("*") or self.at("/") or self.at("%"):
            op = self.take()[1]
            node = expr.Binary(op, node, self._unary(d))
        return node

    def _unary(self, d: int) -> expr.Node:
        if self.at("-"):
            self.i += 1
            if d > MAX_DEPTH:
                self.fail("nested too deeply")
            return expr.Unary("-", self._unary(d + 1))
        return self._primary(d)

    def _primary(self, d: int) -> expr.Node:
        kind, word, _ = self.take()
        if kind == "number":
            return expr.Literal(float(word) if any(c in word for c in ".eE") else int(word))
        if kind == "string":
            return expr.Literal(_unquote(word))
        if kind == "keyword" and word in ("true", "false"):
            return expr.Literal(word == "true")
        if kind == "name":
            return expr.Name(self._ref(word))
        if word == "(":
            node = self.expression(d)
            self.expect(")")
            return node
        if word == "[":
            items: list[expr.Node] = []
            while not self.at("]"):
                items.append(self.expression(d))
                if not self.at("]"):
                    self.expect(",")
            self.i += 1
            return expr.ListOf(tuple(items))
        self.i -= 1
        self.fail("expected a value")
        raise AssertionError  # (fail raises)

    def _ref(self, first: str) -> expr.Ref:
        item = None
        if self.at("[") and (self.peek(1) or ("", "", 0))[0] == "number":
            self.i += 1
            raw = self.take()[1]
            if not raw.isdigit():
                self.fail("an item index is a whole number")
            item = int(raw)
            self.expect("]")
        parts: list[str] = []
        while self.at("."):
            self.i += 1
            kind, word, _ = self.take()
            if kind not in ("name", "keyword"):
                self.i -= 1
                self.fail("expected a name after '.'")
            parts.append(word)
        if self.at("[") and (self.peek(1) or ("", "", 0))[0] == "string":
            self.i += 1
            parts.append(_unquote(self.take()[1]))
            self.expect("]")
        if not parts:
            self.fail(f"'{first}' names no metric: write {first}.METRIC")
        if first == expr.PARAMS and (item is not None or len(parts) != 1):
            self.fail("a parameter is written params.NAME")
        return expr.Ref(task=first, item=item, name=".".join(parts))


def _unquote(word: str) -> str:
    return re.sub(r"\\(.)", r"\1", word[1:-1])


def _collect(node: expr.Node, out: list[expr.Ref]) -> None:
    if isinstance(node, expr.Name):
        out.append(node.ref)
    elif isinstance(node, expr.ListOf):
        for item in node.items:
            _collect(item, out)
    elif isinstance(node, expr.Unary):
        _collect(node.operand, out)
    elif isinstance(node, expr.Binary):
        _collect(node.left, out)
        _collect(node.right, out)
