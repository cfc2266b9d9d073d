"""Job names on the command line: every command that takes a job id takes its name too.

People remember the name they gave a job (`mlp-demo`), not its id. A name is looked up
with the search API's exact `in` filter on `name` (a `like` would also find `mlp-demo-2`)
among the project's live jobs. The versions of a job share its name: a command about one
job refuses such a name and lists the ids; a command about the whole family of versions
(`versions`, `diff`, `new-version`) takes the newest.
"""

from __future__ import annotations

import uuid
from typing import Any

from corral.cli import render
from corral.sdk import client

#: the most jobs one name is looked up among (versions of one job, in practice)
_PAGE = 50


def job_id(api: client.Client, ref: str, *, family: bool = False) -> str:
    """The id of the job `ref` names: `ref` itself when it is an id, or the one live job
    named `ref`; with `family`, the newest of the versions named `ref`.

    A `ref` that is neither an id nor a name is returned as it is: the server then says
    that no such job exists.
    """
    if _is_uuid(ref):
        return ref
    name_filter = {"key": "name", "operator": "in", "value": [ref]}
    found = api.list_jobs(filters=[name_filter], limit=_PAGE)
    items: list[dict[str, Any]] = found.get("items") or []
    if not items:
        return ref
    if len(items) == 1 or (family and len({_family(j) for j in items}) == 1):
        return str(items[0]["metadata"]["id"])  # the newest: the search sorts newest first
    raise render.Failure(_ambiguous(ref, int(found.get("total") or len(items)), items))


def _is_uuid(ref: str) -> bool:
    try:
        return str(uuid.UUID(ref)) == ref.lower()
    except ValueError:
        return False


def _family(job: dict[str, Any]) -> str:
    meta = job["metadata"]
    return str(meta.get("family_id") or meta["id"])


def _ambiguous(name: str, total: int, items: list[dict[str, Any]]) -> str:
    jobs = ", ".join(f"{j['metadata']['id']} ({_what(j)})" for j in items)
    more = f" and {total - len(items)} more" if total > len(items) else ""
    return f"{total} jobs are named '{name}': {jobs}{more}; give the id of one"


def _what(job: dict[str, Any]) -> str:
    version = job["metadata"].get("version")
    phase = render.phase_label(job.get("status") or {})
    return f"{version}, {phase}" if version else phase
