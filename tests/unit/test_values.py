"""`values.value`: frozen to the type checker, hashable and comparable on its fields, a
slotted dataclass at run time (cheap to build: the reconciler builds hundreds a pass)."""

from __future__ import annotations

import dataclasses
import pathlib
import textwrap

import pytest
from mypy import api as mypy_api

from corral.domain import resources, scheduling, values
from corral.store import kind_rows, rows


@values.value
class Point:
    x: int
    y: str = ""
    note: str = dataclasses.field(default="", compare=False)


def test_a_value_compares_and_hashes_on_its_fields_and_changes_only_by_copy() -> None:
    a, b = Point(1, "a", note="one"), Point(1, "a", note="other")
    assert a == b and hash(a) == hash(b)  # a field left out of comparison is left out
    assert len({a, b, Point(2, "a")}) == 2
    moved = dataclasses.replace(a, x=5)
    assert (moved.x, a.x) == (5, 1)
    assert not hasattr(a, "__dict__")  # slots: no attribute can be added by mistake


def test_mypy_refuses_an_assignment_to_a_field_of_a_value(tmp_path: pathlib.Path) -> None:
    src = tmp_path / "uses_a_value.py"
    src.write_text(textwrap.dedent("""
        from corral.domain import values

        @values.value
        class Point:
            x: int

        p = Point(1)
        p.x = 2
        Point("one")
    """))
    out, _err, status = mypy_api.run([str(src), "--no-incremental", "--follow-imports=silent",
                                      "--python-version", "3.11"])
    assert status == 1, out
    assert 'Property "x" defined in "Point" is read-only' in out
    assert 'Argument 1 to "Point" has incompatible type "str"; expected "int"' in out


@pytest.mark.parametrize("cls", [
    rows.Job, rows.QueuedJob, rows.Task, rows.LiveTask, kind_rows.Loop,
    scheduling.Queued, scheduling.Running, scheduling.Node, scheduling.Quota,
    resources.Resources,
])
def test_what_a_pass_builds_by_the_hundred_is_a_value(cls: type) -> None:
    """Built without a frozen dataclass's `object.__setattr__` per field, and with slots."""
    params = cls.__dataclass_params__  # type: ignore[attr-defined]
    assert not params.frozen and params.unsafe_hash and "__slots__" in vars(cls)
