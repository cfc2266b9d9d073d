"""`value`: the dataclass of what corral reads and builds by the hundred on every scheduler
pass: the store's rows, the scheduler's inputs, amounts of resources.

A `value` class is frozen for the type checker (mypy refuses an assignment to a field, as
for `dataclasses.dataclass(frozen=True)`) and hashable on its fields, as a frozen dataclass
is; at run time it is a plain dataclass with slots. A frozen dataclass's `__init__` sets
each field through `object.__setattr__`, several times slower, and a reconciler pass
builds hundreds of rows and scheduler inputs from the queue's window. What is built a few
at a time stays a `dataclasses.dataclass(frozen=True)`.

Nothing stops an assignment at run time, so code that changes a value makes a new one
(`dataclasses.replace`), and mypy, which CI runs over all of `corral`, holds to that.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import TypeVar

T = TypeVar("T")


# (`frozen_default` is PEP 681's keyword, which typing's dataclass_transform passes on in
# Python 3.11 and mypy reads.)
@typing.dataclass_transform(frozen_default=True)
def value(cls: type[T]) -> type[T]:
    """A dataclass with slots, hashable on its fields, frozen for the type checker."""
    return dataclasses.dataclass(slots=True, unsafe_hash=True)(cls)
