"""A task's log in pieces (corral additions): a window of whole lines before or after a
byte offset, a search, a download.

A log may be gigabytes long. A client (the console) opens it at its end, reads back a
window at a time as its reader scrolls, searches it a bounded stretch per call, and
downloads it as a stream: nothing here reads a log whole into memory.
"""

from __future__ import annotations

import dataclasses
import pathlib
from collections.abc import Iterator
from typing import Annotated, Any

import sqlalchemy as sa
from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse

from corral.api import deps, schemas
from corral.api.deps import Ctx
from corral.domain import errors, jobs, specs
from corral.storage import logfiles, runs
from corral.store import job_repo

router = APIRouter(prefix="/v2/{project_id}/training-jobs/{training_job_id}/tasks/{task_id}",
                   tags=["logs"])
ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": schemas.ErrorBody} for code in (400, 404, 500)}
#: a window's size by default, and at most
WINDOW_BYTES = 256 * 1024
MAX_WINDOW_BYTES = 1024 * 1024
#: what one search call reads at most before it answers where to go on
SEARCH_SCAN_BYTES = 64 * 1024 * 1024
DOWNLOAD_CHUNK = 1024 * 1024

Attempt = Annotated[specs.Ordinal | None, Query(
    description="the attempt (a running record, 1 for the first); default the latest")]


@dataclasses.dataclass(frozen=True)
class Located:
    """A task's log: its file, which attempt, and whether it has stopped growing."""

    path: pathlib.Path
    attempt: int  #: 0 while the job has not started
    latest: int
    finished: bool
    phase: str
    job_name: str


def locate(ctx: deps.Context, project_id: str, job_id: str, task: str,
           attempt: int | None) -> Located:
    """The log of `task` in `attempt` (default the latest), or NotFound."""
    with ctx.store.read() as conn:
        return _locate(conn, ctx, project_id, job_id, task, attempt)


def _locate(conn: sa.Connection, ctx: deps.Context, project_id: str, job_id: str, task: str,
            attempt: int | None) -> Located:
    row = job_repo.get_job(conn, project_id, job_id)
    if task not in jobs.task_names(row.node_count):
        raise errors.NotFound(f"task '{task}' does not exist in training job '{job_id}'")
    latest = job_repo.latest_attempt(conn, job_id)
    if attempt is not None and not 1 <= attempt <= max(latest, 1):
        raise errors.NotFound(f"attempt {attempt} does not exist (latest is {latest})")
    att = attempt or latest
    states = {t.name: t.state for t in job_repo.tasks_of(conn, job_id, att)} if att else {}
    finished = (jobs.Phase(row.phase) in jobs.TERMINAL or (0 < att < latest)
                or (task in states and jobs.TaskState(states[task]) in jobs.TASK_DONE))
    path = runs.RunPaths(ctx.settings.runs_dir, job_id).log_path(max(att, 1), task)
    return Located(path=path, attempt=att, latest=latest, finished=finished, phase=row.phase,
                   job_name=row.name)


def text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


@router.get("/logs/window", responses=ERRORS)
def read_log_window(
    project_id: str, training_job_id: str, task_id: str, ctx: Ctx,
    attempt: Attempt = None,
    start: Annotated[specs.ByteOffset | None, Query(
        description="the window starts here and ends after a line break")] = None,
    end: Annotated[specs.ByteOffset | None, Query(
        description="the window ends here and starts at a line's start")] = None,
    max_bytes: Annotated[int, Query(ge=1, le=MAX_WINDOW_BYTES)] = WINDOW_BYTES,
) -> dict[str, Any]:
    """Whole lines of a task's log: from `start`, or up to `end`, or (neither) its last
    lines; `offset` and `next_offset` are where the window starts and ends."""
    if start is not None and end is not None:
        raise errors.BadParameter("give start or end, not both")
    log = locate(ctx, project_id, training_job_id, task_id, attempt)
    if not log.attempt:
        win = logfiles.Window(b"", 0, 0, 0)
    elif start is not None:
        win = logfiles.after(log.path, start, max_bytes)
    else:
        win = logfiles.before(log.path, specs.MAX_BYTES if end is None else end, max_bytes)
    return {"content": text(win.data), "offset": win.start, "next_offset": win.end,
            "full_size": win.size, "attempt": log.attempt,
            "finished": log.finished and win.end >= win.size}


@router.get("/logs/search", responses=ERRORS)
def search_log(
    project_id: str, training_job_id: str, task_id: str, ctx: Ctx,
    q: Annotated[str, Query(min_length=1, max_length=256, description="the text to find")],
    attempt: Attempt = None,
    offset: Annotated[specs.ByteOffset, Query(description="where to start: 0, or the "
                                              "`next_offset` of the previous call")] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 200,
    ignore_case: bool = True,
) -> dict[str, Any]:
    """The lines holding `q`, each with the offset it starts at. One call reads at most
    64 MiB of the log: while `done` is false, call again from `next_offset`."""
    log = locate(ctx, project_id, training_job_id, task_id, attempt)
    if not log.attempt:
        found = logfiles.Found([], 0, 0)
    else:
        found = logfiles.search(log.path, q.encode(), start=offset, max_scan=SEARCH_SCAN_BYTES,
                                limit=limit, ignore_case=ignore_case)
    return {"matches": [{"offset": m.offset, "line": text(m.line)} for m in found.matches],
            "next_offset": found.next_offset, "full_size": found.size,
            "attempt": log.attempt, "done": found.next_offset >= found.size}


@router.get("/logs/download", response_class=StreamingResponse, responses={
    **ERRORS, 200: {"description": "the log file",
                    "content": {"text/plain": {"schema": {"type": "string"}}}}})
def download_log(project_id: str, training_job_id: str, task_id: str, ctx: Ctx,
                 attempt: Attempt = None) -> StreamingResponse:
    """The whole log as a file, streamed: as long as it was when asked for."""
    return whole(locate(ctx, project_id, training_job_id, task_id, attempt), task_id)


def whole(log: Located, task_id: str, *, inline: bool = False) -> StreamingResponse:
    """The log as a file, streamed (`inline`: to be shown, not saved)."""
    fh = logfiles.open_log(log.path) if log.attempt else None
    if fh is None:
        raise errors.NotFound(f"task '{task_id}' has no log yet")
    size = fh.seek(0, 2)
    fh.seek(0)

    def chunks() -> Iterator[bytes]:
        with fh:
            left = size
            while left > 0:
                data = fh.read(min(DOWNLOAD_CHUNK, left))
                if not data:
                    return
                left -= len(data)
                yield data

    name = f"{log.job_name}-{task_id}-attempt-{log.attempt}.log"
    how = "inline" if inline else "attachment"
    # A log is the job's text: never read by a browser as a page of this origin.
    return StreamingResponse(chunks(), media_type="text/plain; charset=utf-8", headers={
        "Content-Length": str(size), "Content-Disposition": f'{how}; filename="{name}"',
        "X-Content-Type-Options": "nosniff", "Content-Security-Policy": "sandbox"})
