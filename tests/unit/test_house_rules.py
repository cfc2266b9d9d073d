"""The sizes docs/development.md promises of the code: modules under 600 lines, functions
at most 80 (Alembic migrations' table-creating `upgrade` functions aside); and the
layering docs/architecture.md states that import-linter cannot see: the API, the CLI and
the console open no write transaction of their own."""

from __future__ import annotations

import ast
import pathlib

SRC = pathlib.Path(__file__).resolve().parents[2] / "src" / "corral"
MODULE_LINES = 600
FUNCTION_LINES = 80


def _modules() -> list[pathlib.Path]:
    return sorted(SRC.rglob("*.py"))


def test_every_module_is_under_600_lines() -> None:
    long = {str(p.relative_to(SRC)): n for p in _modules()
            if (n := len(p.read_text().splitlines())) >= MODULE_LINES}
    assert long == {}


def test_no_function_is_over_80_lines() -> None:
    long = {}
    for path in _modules():
        if "migrations" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                size = (node.end_lineno or node.lineno) - node.lineno + 1
                if size > FUNCTION_LINES:
                    long[f"{path.relative_to(SRC)}:{node.lineno} {node.name}"] = size
    assert long == {}


#: what opens a write transaction (store/db.Store.begin, turn; Runtime.credentials_change)
WRITE_OPENERS = {"begin", "turn", "credentials_change"}
#: modules of the front layers allowed to open one anyway, each with why: none must
ALLOWED_WRITES: dict[str, str] = {}


def test_the_front_layers_open_no_write_transaction() -> None:
    """API handlers parse, authorise, call a service (or a kind's action) and render: the
    service opens the transaction (docs/architecture.md, "A request, top to bottom")."""
    found = []
    for layer in ("api", "cli", "web"):
        for path in sorted((SRC / layer).rglob("*.py")):
            name = str(path.relative_to(SRC))
            for node in ast.walk(ast.parse(path.read_text())):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                        and node.func.attr in WRITE_OPENERS and name not in ALLOWED_WRITES):
                    found.append(f"{name}:{node.lineno} .{node.func.attr}(")
    assert found == []
