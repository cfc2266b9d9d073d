"""Request bodies the API reads itself: those that may be YAML as well as JSON (pipelines,
incremental-learning jobs), which FastAPI does not parse.

One reader, so that what is not a body is refused alike wherever it is sent: not JSON or
YAML, or nested deeper than any body corral takes. Both parsers recurse as deep as the
body goes, and so would what reads the data after them (validation, JSON writing): a body
of a few thousand `[` raised RecursionError, a 500, where FastAPI's own parsing answers
400. The depth is checked without recursion, once the data is read.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from corral.domain import errors

YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml")
#: the deepest nesting of lists and mappings a body may have (corral's deepest, a
#: pipeline task's channel, is about 8)
MAX_DEPTH = 64
#: the most values a body may hold, a YAML alias counted each time it is used (what
#: reads the data expands them: a few lines of aliases can stand for billions of values)
MAX_VALUES = 1_000_000


def is_yaml(content_type: str) -> bool:
    return content_type.split(";")[0].strip().lower() in YAML_TYPES


def read(raw: bytes, content_type: str) -> Any:
    """The body's data, from YAML when its Content-Type says so, else JSON; BadJSON for
    what is neither, nests deeper than MAX_DEPTH or holds more than MAX_VALUES."""
    try:
        data = yaml.safe_load(raw.decode("utf-8")) if is_yaml(content_type) else json.loads(raw)
    except RecursionError:
        raise errors.BadJSON(_TOO_DEEP) from None
    except (ValueError, yaml.YAMLError) as exc:  # UnicodeDecodeError is a ValueError
        raise errors.BadJSON(f"the body is not valid JSON or YAML: "
                             f"{' '.join(str(exc).split())[:200]}") from None
    check_size(data)
    return data


_TOO_DEEP = f"the body nests lists or mappings more than {MAX_DEPTH} deep"


def check_size(data: Any) -> None:
    """BadJSON when `data` nests lists or mappings more than MAX_DEPTH deep or holds more
    than MAX_VALUES values (walked without recursion: the body decides how deep it goes)."""
    todo, seen = [(data, 1)], 0
    while todo:
        item, depth = todo.pop()
        seen += 1
        if seen > MAX_VALUES:
            raise errors.BadJSON(f"the body holds more than {MAX_VALUES} values (a YAML alias "
                                 "counts each time it is used)")
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > MAX_DEPTH:
            raise errors.BadJSON(_TOO_DEEP)
        todo += [(child, depth + 1) for child in children]
