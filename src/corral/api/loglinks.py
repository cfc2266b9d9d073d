"""A task's log through a signed link that expires: ModelArts' `.../logs/url` call.

ModelArts answers a temporary OBS URL that opens the log in a browser, or downloads it,
with no other credential. corral serves the link itself: `/corral/log-links/...` with the
attempt the log is of, when the link expires and whether it shows or downloads the log,
signed with a key derived from the server key (services/secretbox.py). Anyone holding the
link reads that log until it expires (`log_url_seconds`), as with ModelArts' link; a
changed link, an expired one or one of a job since deleted opens nothing. The link is
the only credential its path takes (auth.PUBLIC_PREFIXES).
"""

from __future__ import annotations

import time
import urllib.parse
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import StreamingResponse

from corral.api import deps, logs, schemas
from corral.api.deps import Ctx
from corral.domain import errors, specs

router = APIRouter(tags=["logs"])
#: where the links are served; no credential but the link's own signature is asked
PREFIX = "/corral/log-links/"
Disposition = Literal["inline", "attachment"]


def _message(project: str, job_id: str, task: str, attempt: int, expires: int,
             disposition: str) -> str:
    return "\n".join((project, job_id, task, str(attempt), str(expires), disposition))


def _box(ctx: deps.Context) -> Any:
    if ctx.box is None:
        raise errors.CorralError("signed links need the server key, which this server "
                                 "was started without")
    return ctx.box


@router.get("/v2/{project_id}/training-jobs/{training_job_id}/tasks/{task_id}/logs/url",
            response_model=schemas.LogUrlOut, responses=logs.ERRORS)
def show_training_job_logs_url(
    project_id: str, training_job_id: str, task_id: str, ctx: Ctx, request: Request,
    content_type: Annotated[str | None, Header(
        description="application/octet-stream: a link that downloads the log; "
        "otherwise (text/plain) one that shows it")] = None,
) -> dict[str, Any]:
    """A link to the task's log (its latest attempt's, as it is when the link is opened)
    that needs no credential until it expires."""
    log = logs.locate(ctx, project_id, training_job_id, task_id, None)
    if not log.attempt:
        raise errors.NotFound(f"task '{task_id}' has no log yet")
    download = (content_type or "").split(";")[0].strip().lower() == "application/octet-stream"
    disposition = "attachment" if download else "inline"
    expires = int(ctx.clock()) + ctx.settings.log_url_seconds
    signature = _box(ctx).sign_link(_message(project_id, training_job_id, task_id,
                                             log.attempt, expires, disposition))
    path = "/".join(urllib.parse.quote(part, safe="")
                    for part in (project_id, training_job_id, task_id))
    query = urllib.parse.urlencode({"attempt": log.attempt, "expires": expires,
                                    "disposition": disposition, "signature": signature})
    base = str(request.url.replace(path="", query="", fragment="")).rstrip("/")
    return {"obs_url": f"{base}{PREFIX}{path}?{query}"}


@router.get(PREFIX + "{project}/{training_job_id}/{task_id}", response_class=StreamingResponse,
            # 401: the link's signature is its credential (changed or expired)
            responses={**logs.ERRORS, 401: {"model": schemas.ErrorBody}, 200: {
                "description": "the log file",
                "content": {"text/plain": {"schema": {"type": "string"}}}}})
def open_log_link(
    project: str, training_job_id: str, task_id: str, ctx: Ctx,
    attempt: specs.Ordinal,
    expires: Annotated[int, Query(ge=0, le=specs.MAX_TIME_MS // 1000,
                                  description="seconds since the epoch")],
    disposition: Disposition,
    signature: Annotated[str, Query(pattern="^[0-9a-fA-F]{64}$")],
) -> StreamingResponse:
    """The log a `.../logs/url` link names, while the link holds (no other credential)."""
    message = _message(project, training_job_id, task_id, attempt, expires, disposition)
    if not _box(ctx).link_signed(message, signature):
        raise errors.BadCredential("the link's signature does not match: ask for a new "
                                   "link (.../logs/url)")
    if ctx.clock() > expires:
        raise errors.BadCredential(
            f"the link expired at {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime(expires))}"
            ": ask for a new one (.../logs/url)")
    log = logs.locate(ctx, project, training_job_id, task_id, attempt)
    return logs.whole(log, task_id, inline=disposition == "inline")
