"""Errors become HTTP answers in the API alone: the status of each error class is the API's
table, the domain's errors carry none, and docs/api.md's table of errors is what the
API answers."""

from __future__ import annotations

import pathlib
import re

import pytest

import corral.api.app  # noqa: F401  (every error class the API may answer with, loaded)
from corral.api import error_bodies
from corral.domain import errors

DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs"


def _classes(base: type[errors.CorralError] = errors.CorralError) -> list[type[errors.CorralError]]:
    found = [base]
    for sub in base.__subclasses__():
        found += _classes(sub)
    return found


def test_no_error_class_carries_an_http_status() -> None:
    assert [c.__qualname__ for c in _classes() if hasattr(c, "http_status")] == []


@pytest.mark.parametrize(("error", "status"), [
    (errors.CorralError(), 500), (errors.NeverFits(), 400), (errors.BadEngine(), 400),
    (errors.InvalidState(), 409), (error_bodies.NotReady(), 503),
])
def test_an_error_answers_with_its_nearest_listed_classs_status(
        error: errors.CorralError, status: int) -> None:
    answer = error_bodies.of(error)
    assert answer.status_code == status


def test_the_docs_table_of_errors_is_what_the_api_answers() -> None:
    text = (DOCS / "api.md").read_text().split("## Errors", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(ModelArts\.\d+)` \| (\d+) \|", text, flags=re.M)
    assert len(rows) > 5
    answered = {(c.error_code, error_bodies.status_of(c())) for c in _classes()
                if c.__init__ is errors.CorralError.__init__}
    assert {(code, int(status)) for code, status in rows} <= answered
