"""The documentation says what the code does: settings, API routes, links, the README.

Each test reads a page the way a person would (its tables, its links, its first commands)
and compares it with the code, so that adding a setting or a route, changing a default or
moving a page without updating the docs fails here.
"""

from __future__ import annotations

import importlib
import json
import pathlib
import pkgutil
import re
import typing
from typing import Any

import pydantic
import pytest
from fastapi import APIRouter
from fastapi.routing import APIRoute

import corral.api
from corral import settings

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
#: pages whose relative links must lead somewhere
LINKED_PAGES = [README, ROOT / "CHANGELOG.md", ROOT / "benchmarks" / "README.md",
                *sorted(DOCS.glob("*.md"))]
#: the README's first two commands: set up and run the demo, set up and run the tests
DEMO = ("python3 -m venv .venv && .venv/bin/pip install -q -e '.[examples]' "
        "&& .venv/bin/corral demo")
TESTS = ("python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]' "
         "&& .venv/bin/pytest -q")
#: the configuration file's tables, by the header docs/configuration.md gives them
TABLES: dict[str, type[pydantic.BaseModel]] = {
    "[[flavors]]": settings.FlavorConfig,
    "[[engines]]": settings.EngineConfig,
    "[accelerators.<name>]": settings.AcceleratorConfig,
    "[[pools]]": settings.PoolConfig,
    "[storage]": settings.StorageConfig,
    "[retention]": settings.RetentionConfig,
    "[s3]": settings.S3Config,
}
#: settings that say where the TOML file is, so they have no key in it
NOT_IN_FILE = {"home", "config"}


# --- reading markdown ------------------------------------------------------------------


def _cells(line: str) -> list[str]:
    """The cells of a table row (`\\|` inside a cell is not a separator)."""
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]


def _tables(text: str) -> list[tuple[list[str], list[list[str]]]]:
    """Every table of a page: (header cells, rows of cells)."""
    out: list[tuple[list[str], list[list[str]]]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines) - 1:
        if lines[i].lstrip().startswith("|") and re.match(r"^\s*\|[\s:|-]+\|\s*$", lines[i + 1]):
            header, rows = _cells(lines[i]), []
            i += 2
            while i < len(lines) and lines[i].lstrip().startswith("|"):
                rows.append(_cells(lines[i]))
                i += 1
            out.append((header, rows))
        else:
            i += 1
    return out


def _code(cell: str) -> str | None:
    """The first `code` span of a cell."""
    found = re.search(r"`([^`]*)`", cell)
    return found.group(1) if found else None


def _slug(heading: str) -> str:
    """The anchor a heading gets (GitHub's rule)."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(page: pathlib.Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    in_code = False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if in_code or not line.startswith("#"):
            continue
        slug = _slug(line.lstrip("#"))
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def _links(page: pathlib.Path) -> list[str]:
    """The targets of a page's markdown links, code spans and blocks left out."""
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    return re.findall(r"\]\(([^)\s]+)\)", text)


def _commands(text: str) -> list[str]:
    """The lines of a page's code blocks, fenced or indented, in order."""
    out: list[str] = []
    fenced = False
    previous = ""
    indented = False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif fenced:
            out.append(line.strip())
        elif line.startswith("    ") and line.strip() and (indented or not previous.strip()):
            indented = True
            out.append(line.strip())
        elif line.strip():
            indented = False
        previous = line
    return [c for c in out if c]


# --- configuration.md documents every setting -----------------------------------------


def shown(value: Any) -> str:
    """A default as docs/configuration.md writes it."""
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, pathlib.Path):
        home = pathlib.Path.home()
        return f"~/{value.relative_to(home)}" if value.is_relative_to(home) else str(value)
    if isinstance(value, str):
        return value or '""'
    if isinstance(value, pydantic.BaseModel):
        return json.dumps(value.model_dump(mode="json"))
    return json.dumps(value)


def _default(field: Any) -> str:
    if field.is_required():
        return "required"
    return shown(field.get_default(call_default_factory=True))


def _rows(first_header: str) -> dict[str, list[str]]:
    """The rows of the configuration table whose first header cell is `first_header`, by
    the name in their first cell."""
    found = [rows for header, rows in _tables((DOCS / "configuration.md").read_text())
             if header and header[0] == first_header]
    assert len(found) == 1, f"docs/configuration.md needs one table headed '{first_header}'"
    out: dict[str, list[str]] = {}
    for row in found[0]:
        name = _code(row[0]) or row[0]
        assert name not in out, f"{name} is documented twice under '{first_header}'"
        out[name] = row
    return out


def test_every_setting_is_documented_with_its_default_and_variable() -> None:
    rows = _rows("setting")
    fields = settings.Settings.model_fields
    assert sorted(rows) == sorted(fields), (
        f"undocumented: {sorted(set(fields) - set(rows))}; "
        f"not settings: {sorted(set(rows) - set(fields))}")
    prefix = settings.Settings.model_config.get("env_prefix", "")
    for name, field in fields.items():
        _setting, _type, default, env, toml, _meaning = rows[name]
        assert _code(default) == _default(field), f"{name}: the default is {_default(field)}"
        assert _code(env) == f"{prefix}{name.upper()}", f"{name}: its variable"
        if name in NOT_IN_FILE:
            assert toml == "—", f"{name}: found through the environment, not the file"
        else:
            key = re.sub(r"[\[\]]", "", _code(toml) or "").split(".")[0]
            assert key == name, f"{name}: TOML key"


def _models_in(annotation: Any) -> set[type[pydantic.BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel):
        return {annotation}
    return {m for arg in typing.get_args(annotation) for m in _models_in(arg)}


def test_every_table_of_the_file_is_documented_key_by_key() -> None:
    nested = {m for f in settings.Settings.model_fields.values() for m in _models_in(f.annotation)}
    assert nested == set(TABLES.values()), "a table of the settings has no documentation"
    for header, model in TABLES.items():
        rows = _rows(f"key of `{header}`")
        assert sorted(rows) == sorted(model.model_fields), header
        for name, field in model.model_fields.items():
            want = _default(field)
            assert (rows[name][2] if want == "required" else _code(rows[name][2])) == want, (
                f"{header} {name}: the default is {want}")


def test_the_settings_check_would_see_a_changed_default() -> None:
    assert shown(10.0) == "10" and shown(10.5) == "10.5"
    assert shown(None) == "unset" and shown(False) == "false" and shown("") == '""'
    assert shown(pathlib.Path.home() / ".corral") == "~/.corral"
    assert shown(settings.StorageConfig()) == (
        '{"roots": [], "projects": {}, "open_default_project": true}')


# --- api.md lists every route ------------------------------------------------------------


def _routes() -> set[tuple[str, str]]:
    found = set()
    for info in pkgutil.iter_modules(corral.api.__path__):
        module = importlib.import_module(f"corral.api.{info.name}")
        router = getattr(module, "router", None)
        if isinstance(router, APIRouter):
            for route in router.routes:
                if isinstance(route, APIRoute):
                    found |= {(method, route.path) for method in route.methods or ()}
    return found


def test_the_api_reference_lists_every_route_and_no_other() -> None:
    documented = set()
    for header, rows in _tables((DOCS / "api.md").read_text()):
        if header[:2] != ["method", "path"]:
            continue
        for row in rows:
            method, path = _code(row[0]), _code(row[1])
            assert method and path, row
            documented.add((method, path))
    routes = _routes()
    assert routes, "no API routes found"
    assert sorted(routes - documented) == [], "routes missing from docs/api.md"
    assert sorted(documented - routes) == [], "docs/api.md lists calls that do not exist"


# --- links and the README ----------------------------------------------------------------


def _relative_links() -> list[tuple[pathlib.Path, str]]:
    return [(page, link) for page in LINKED_PAGES for link in _links(page)
            if not re.match(r"^[a-z][a-z0-9+.-]*:", link)]


def _id(value: Any) -> str:
    return str(value.relative_to(ROOT)) if isinstance(value, pathlib.Path) else str(value)


@pytest.mark.parametrize(("page", "link"), _relative_links(), ids=_id)
def test_a_relative_link_leads_to_a_file_and_a_heading(page: pathlib.Path, link: str) -> None:
    path, _, anchor = link.partition("#")
    target = (page.parent / path).resolve() if path else page
    assert target.exists(), f"{page.relative_to(ROOT)}: {link} leads nowhere"
    if anchor and target.suffix == ".md":
        assert anchor in _anchors(target), f"{page.relative_to(ROOT)}: no heading #{anchor}"


def test_links_and_headings_are_read_as_a_reader_follows_them() -> None:
    links = [link for page, link in _relative_links() if page == README]
    assert "docs/configuration.md" in links
    assert _slug(" The login file and `corral login`") == "the-login-file-and-corral-login"
    assert _slug(" run_as") == "run_as"


def test_the_readme_is_short_and_starts_with_the_two_commands() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= 200
    assert _commands(text)[:2] == [DEMO, TESTS]
    before = text[:text.index(TESTS)]
    assert [line for line in before.splitlines() if line.startswith("#")] == ["# corral"]


def test_ci_runs_the_readmes_test_command() -> None:
    assert TESTS in (ROOT / ".ci" / "run").read_text()


def test_commands_are_read_from_indented_and_fenced_blocks() -> None:
    text = "text\n\n    first\n    second\nmore\n\n```\nthird\n```\n  not code\n"
    assert _commands(text) == ["first", "second", "third"]


def _diagram(text: str) -> set[tuple[str, str]]:
    """The edges of the mermaid state diagram after the TRANSITIONS marker."""
    after = text.split("drawn from corral.domain.jobs.TRANSITIONS", 1)[1]
    block = after.split("```mermaid", 1)[1].split("```", 1)[0]
    edges = set()
    for line in block.splitlines():
        if "-->" in line:
            src, dst = (part.strip() for part in line.split("-->"))
            edges.add((src, dst))
    return edges


def test_the_state_diagram_is_the_transition_table() -> None:
    from corral.domain import jobs

    expected = {(p.value, q.value) for p, nxt in jobs.TRANSITIONS.items() for q in nxt}
    expected |= {("[*]", jobs.Phase.CREATING.value)}
    expected |= {(p.value, "[*]") for p in jobs.TERMINAL}
    assert _diagram((DOCS / "architecture.md").read_text()) == expected
