"""Live data as Server-Sent Events (corral additions): jobs' changes, and a task's log as
it grows.

Each stream is an ordinary GET answered with `text/event-stream`, authenticated like every
call (a header, so a browser reads it with `fetch`, not `EventSource`). Events are
`event: <name>` with one line of JSON as `data`; a comment line every KEEPALIVE_S keeps
proxies from closing a quiet stream. A stream ends by itself after its `timeout` (the
client connects again, from where it was) and when its client goes away.

Job changes come from the same notifications as `?watch=` (api/watch.py): a job is read
again the moment a committed transaction changed it, and every second anyway. A log is
held open while it is followed (`logfiles.OpenLog`) and looked at every LOG_POLL_S: one
`fstat`, and when it grew a `pread` from the offset already sent, a window of whole lines
at a time, so a log of any size is never read whole. A stream sends one window per turn of
the event loop and LOG_BYTES_PER_S on average, and all streams together at most
`deps.LOG_BYTES_PER_S` (`pacing.Rate`): a log that floods while many follow it is shared out
evenly, what streams cost the server is bounded however many there are, and the API
answers meanwhile. Both run on the event loop's thread:
a hand-over to a thread for each read, and a walk of the log's path for each open, cost
more than the read (100 followers took 40% of a core that way at a 0.1 s look, about 20%
this way; docs/performance.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import pathlib
import random
from collections.abc import AsyncIterator, Sequence
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse

from corral.api import deps, logs, schemas, watch
from corral.api.deps import Ctx
from corral.domain import errors, pacing, specs
from corral.storage import logfiles
from corral.store import job_repo

router = APIRouter(prefix="/v2/{project_id}", tags=["streams"])
ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": schemas.ErrorBody} for code in (400, 404, 500)}
KEEPALIVE_S = 15.0
#: a stream ends after `timeout` seconds (by default, and at most); its client connects again
DEFAULT_STREAM_S = 300.0
MAX_STREAM_S = 3600.0
LOG_POLL_S = 0.05
#: at most this much of a log per event: what a stream sends in one turn of the event loop
LOG_EVENT_BYTES = 64 * 1024
#: how far back a stream of new lines looks for the start of the line being written
LINE_BACK_BYTES = 256 * 1024
#: what a log stream sends per second at most, on average (a second's worth may go at once);
#: all of a server's log streams together send deps.LOG_BYTES_PER_S at most
LOG_BYTES_PER_S = 1024 * 1024
#: how often a log stream reads its task's state when nothing announced a change
STATE_RECHECK_S = 2.0
MEDIA = "text/event-stream"
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
#: how the schema describes a stream's answer
STREAM_RESPONSES: dict[int | str, dict[str, Any]] = {
    **ERRORS, 200: {"description": "Server-Sent Events: each an event name and one line of "
                                   "JSON",
                    "content": {MEDIA: {"schema": {
                        "type": "object", "required": ["event", "data"],
                        "properties": {"event": {"type": "string"},
                                       "data": {"type": "string"}}}}}}}
Timeout = Annotated[float, Query(gt=0, le=MAX_STREAM_S,
                                 description="seconds the stream lasts at most")]


def event(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


KEEPALIVE = b": keep-alive\n\n"


@router.get("/training-job-changes", responses=STREAM_RESPONSES,
            response_class=StreamingResponse)
async def stream_job_changes(
    project_id: str, ctx: Ctx, request: Request,
    job_id: Annotated[list[Annotated[str, Query(min_length=1, max_length=64)]], Query(
        min_length=1, max_length=100, description="the jobs to follow (repeat it)")],
    timeout: Timeout = DEFAULT_STREAM_S,
) -> StreamingResponse:
    """`event: job` with `{job_id, phase, secondary_phase, updated_at}` for each job at
    once, then each time one changes; `{job_id, deleted: true}` once for a job that is
    gone (deleted, or never was the project's)."""
    ids = list(dict.fromkeys(job_id))
    # Read before the answer starts: a database that fails answers an error body, not a
    # stream cut short.
    first = await ctx.blocking(_states, ctx, project_id, ids)
    return StreamingResponse(_job_events(ctx, request, project_id, ids, first, timeout),
                             media_type=MEDIA, headers=HEADERS)


def _states(ctx: deps.Context, project_id: str,
            ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    with ctx.store.read() as conn:
        for job_id in ids:
            try:
                row = job_repo.get_job(conn, project_id, job_id)
            except errors.NotFound:
                out[job_id] = {"job_id": job_id, "deleted": True}
                continue
            out[job_id] = {"job_id": job_id, "phase": row.phase,
                           "secondary_phase": row.secondary_phase,
                           "updated_at": row.updated_at}
    return out


async def _job_events(ctx: deps.Context, request: Request, project_id: str,
                      ids: list[str], first: dict[str, dict[str, Any]],
                      timeout: float) -> AsyncIterator[bytes]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    sent: dict[str, dict[str, Any]] = {}
    quiet_since = loop.time()
    with contextlib.ExitStack() as stack:
        watchers = [stack.enter_context(ctx.changes.watching(i)) for i in ids]
        states = first
        while True:
            for job_id, state in states.items():
                if sent.get(job_id) != state and not sent.get(job_id, {}).get("deleted"):
                    sent[job_id] = state
                    quiet_since = loop.time()
                    yield event("job", state)
            if loop.time() - quiet_since >= KEEPALIVE_S:
                quiet_since = loop.time()
                yield KEEPALIVE
            if loop.time() >= deadline or await request.is_disconnected():
                return
            await _any(watchers, min(watch.RECHECK_S, max(0.0, deadline - loop.time())))
            for w in watchers:
                w.arm()
            states = await ctx.blocking(_states, ctx, project_id, ids)


async def _any(watchers: Sequence[watch.Watcher], timeout: float) -> None:
    """Until one of the jobs changed, or `timeout` seconds."""
    waits = [asyncio.ensure_future(w.wait(timeout)) for w in watchers]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()


@router.get("/training-jobs/{training_job_id}/tasks/{task_id}/logs/stream",
            responses=STREAM_RESPONSES, response_class=StreamingResponse)
async def stream_log(
    project_id: str, training_job_id: str, task_id: str, ctx: Ctx, request: Request,
    attempt: logs.Attempt = None,
    offset: Annotated[specs.ByteOffset | None, Query(
        description="start here (a line's start); default: the log's start, or see `tail`")
    ] = None,
    tail: Annotated[int | None, Query(ge=0, le=logs.MAX_WINDOW_BYTES, description=(
        "without `offset`: start at the first whole line of the last `tail` bytes (0: "
        "new lines only, from the start of the one being written)"))] = None,
    timeout: Timeout = DEFAULT_STREAM_S,
) -> StreamingResponse:
    """`event: log` with `{attempt, offset, next_offset, content, full_size}` as the log
    grows, each event's content following on from the last one's (a line still being
    written may come in two); `event: end` with `{attempt, next_offset, phase}` once the
    task has ended and all of its log was sent, and the stream closes. It follows one
    attempt (`attempt`, default the latest when it starts); while the job has not started,
    it waits."""
    log = await ctx.blocking(logs.locate, ctx, project_id, training_job_id, task_id, attempt)
    return StreamingResponse(
        _log_events(ctx, request, project_id, training_job_id, task_id, attempt, log,
                    offset, tail, timeout), media_type=MEDIA, headers=HEADERS)


def _tail_start(path: pathlib.Path, tail: int) -> int:
    """Where a stream of a log's last `tail` bytes starts: at their first whole line, or,
    where they hold none (`tail=0` while a line is being written, or a line longer than
    them), at the start of the line they are in: the first line sent is whole."""
    start = logfiles.before(path, specs.MAX_BYTES, tail).start
    return logfiles.line_start(path, start, LINE_BACK_BYTES)


async def _log_events(ctx: deps.Context, request: Request, project_id: str, job_id: str,
                      task: str, attempt: int | None, log: logs.Located, offset: int | None,
                      tail: int | None, timeout: float) -> AsyncIterator[bytes]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    quiet_since = loop.time()
    # Streams opened together (a page of them) read their tasks' state at different moments,
    # not all in one burst every STATE_RECHECK_S.
    checked = loop.time() - random.uniform(0, STATE_RECHECK_S)
    pos = offset if offset is not None or tail is not None else 0
    opened = logfiles.OpenLog(log.path)
    own = pacing.Rate(LOG_BYTES_PER_S)
    with ctx.changes.watching(job_id) as watcher, contextlib.closing(opened):
        while True:
            watcher.arm()
            if log.attempt and pos is None:  # the last `tail` bytes, from a line's start
                pos = await ctx.blocking(_tail_start, log.path, tail or 0)
            opened.move_to(log.path)
            sent = False
            while log.attempt and pos is not None and opened.size() > pos:
                win = opened.after(pos, LOG_EVENT_BYTES)
                if win.end <= pos:
                    break
                pos, sent = win.end, True
                yield event("log", {"attempt": log.attempt, "offset": win.start,
                                    "next_offset": win.end, "content": logs.text(win.data),
                                    "full_size": win.size})
                # Every other stream and call has its turn before the next window (a write
                # to a client returns at once while its socket has room: a log that grows
                # faster than it is read kept the loop here); past its rate, it waits more.
                await asyncio.sleep(max(own.wait_after(len(win.data), loop.time()),
                                        ctx.log_rate.wait_after(len(win.data), loop.time())))
                if loop.time() >= deadline:
                    return
            if sent:
                quiet_since = loop.time()
            elif log.finished and log.attempt:
                yield event("end", {"attempt": log.attempt, "next_offset": pos or 0,
                                    "phase": log.phase})
                return
            if loop.time() - quiet_since >= KEEPALIVE_S:
                quiet_since = loop.time()
                yield KEEPALIVE
            if loop.time() >= deadline or await request.is_disconnected():
                return
            changed = await watcher.wait(min(LOG_POLL_S, max(0.0, deadline - loop.time())))
            if changed or loop.time() - checked >= STATE_RECHECK_S or not log.attempt:
                checked = loop.time()
                # The attempt first followed, to its end: a restart is a new stream's.
                attempt = attempt or log.attempt or None
                log = await ctx.blocking(logs.locate, ctx, project_id, job_id, task, attempt)

