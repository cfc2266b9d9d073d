"""Inputs a task follows while it runs (`follow: true`): the rules every copy keeps.

A task reads a local input where it is, and sees it change. A copy of an input (fetched
from object storage to the server, or shipped to a Ray node) is brought up to date every
`PERIOD` instead, by whoever made it, with the same rules:

- the files changed since the last look are copied whole, each written beside its name
  and renamed into it, oldest first and, among files changed at the same moment, those
  in sub-folders before the folder's own: a file that names others (a model_config.json
  naming the model it was written after) never arrives before them;
- a small file that names the input's own location (its URL, or its folder on the server)
  names the copy's instead, so that a path written in it means the same thing where it is
  read;
- what lies in one of the task's own output channels is not followed (it is the task's).
"""

from __future__ import annotations

from collections.abc import Iterable

#: seconds between looks at a followed input
PERIOD = 2.0
#: the largest file whose mention of the input's location is turned into its copy's
REWRITE_MAX = 64 * 1024


def order(changed: Iterable[tuple[str, float]]) -> list[str]:
    """The relative paths of changed files (rel, when it changed) in the order to copy
    them."""
    return [rel for rel, _t in sorted(changed, key=lambda f: (f[1], -f[0].count("/"), f[0]))]


def rewrite(data: bytes, source: str, copy: str) -> bytes:
    """A small file's bytes with the input's location `source` turned into `copy`."""
    if len(data) > REWRITE_MAX or not source or source == copy:
        return data
    return data.replace(source.rstrip("/").encode(), copy.rstrip("/").encode())


def own_outputs(source: str, outputs: Iterable[str]) -> tuple[str, ...]:
    """The folders, relative to input `source`, of the task's output channels inside it."""
    base = source.rstrip("/") + "/"
    return tuple(out[len(base):].strip("/") for out in outputs if out.startswith(base))


def skipped(rel: str, own: Iterable[str]) -> bool:
    """Whether file `rel` of the input lies in one of the task's own outputs."""
    return any(rel == o or rel.startswith(o + "/") for o in own)
