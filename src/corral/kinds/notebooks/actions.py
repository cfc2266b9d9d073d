"""What users do to notebooks: create, change, start, stop, renew the lease, delete, and
open the one-time URL. Each is a guarded change in the caller's transaction; the
controller (woken by the caller once it has committed) does the rest. What the API calls
(below) opens its own transaction, and checks there that the caller may change the
notebook.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

from corral import settings as settings_mod
from corral.domain import errors, identity, notebooks
from corral.kinds.notebooks import session
from corral.services import catalog as catalog_mod
from corral.services import runtime
from corral.storage import paths
from corral.store import kind_repo, kind_rows, notebook_repo

State = notebooks.State


def _secrets() -> dict[str, Any]:
    """A session's secrets: each start makes new ones, so that nothing of an old session
    (its cookie, its URL) opens the next. (JupyterLab has no token of its own any more:
    `jupyter_token` of a session of an earlier version is cleared.)"""
    return {"jupyter_token": None, "access_token": session.new_secret(),
            "cookie_secret": session.new_secret()}


def _lease_defaults(settings: settings_mod.Settings) -> dict[str, int]:
    return {"default_ms": round(settings.notebook_lease * 1000),
            "default_idle_ms": round(settings.notebook_idle * 1000)}


def check_placement(cat: catalog_mod.Catalog, flavor: str, pool_id: str | None,
                    image_id: str, *, shared_fs: bool) -> tuple[str, str]:
    """(flavor id, pool) a notebook may run at, or the refusal. On a Ray pool the cluster
    must share this machine's file system (`ray_shared_fs`): the workspace and the
    session's token are read there at the paths the server gave them."""
    flavor_id = cat.flavor(flavor).flavor_id
    pool = cat.pool(pool_id)
    if session.remote(cat, pool) and not shared_fs:
        raise errors.BadParameter(
            f"pool '{pool}' runs on a Ray cluster that does not share this machine's file "
            "system: a notebook there needs ray_shared_fs = true, its workspace on every "
            "node (docs/notebooks.md)")
    session.check_engine(cat, image_id)
    return flavor_id, pool


def create(conn: sa.Connection, body: notebooks.NotebookCreate, *,
           settings: settings_mod.Settings, cat: catalog_mod.Catalog, policy: paths.Policy,
           project_id: str, user_name: str, now: int) -> str:
    """A new notebook, starting its first session; its id."""
    image_id = body.image_id or settings.notebook_image or cat.engines[0].engine_id
    flavor_id, pool = check_placement(cat, body.flavor, body.pool_id, image_id,
                                      shared_fs=settings.ray_shared_fs)
    notebook_id = notebook_repo.new_id()
    workspace = session.workspace_for(paths.project_home(settings, project_id), notebook_id,
                                      body.volume)
    if body.volume.ownership == "DEDICATED":
        workspace = paths.confine(policy, workspace, "volume.uri")
    lease_type, lease_ms = notebooks.lease_of(body.lease, body.duration,
                                              **_lease_defaults(settings))
    notebook_repo.insert(conn, {
        "id": notebook_id, "project_id": project_id, "name": body.name,
        "description": body.description, "user_name": user_name, "flavor_id": flavor_id,
        "image_id": image_id, "pool_id": pool, "workspace": str(workspace),
        "volume": body.volume.model_dump_json(exclude_none=True),
        "state": State.STARTING.value, "session": 1, "lease_type": lease_type.value,
        "lease_ms": lease_ms, "started_at": now, "created_at": now, "updated_at": now,
        **_secrets()})
    kind_repo.add_event(conn, notebooks.KIND, notebook_id, now,
                        f"Notebook created by {user_name or 'nobody'}: flavor {flavor_id}, "
                        f"engine {image_id}, workspace {workspace}")
    return notebook_id


def update(conn: sa.Connection, nb: kind_rows.Notebook, body: notebooks.NotebookUpdate, *,
           cat: catalog_mod.Catalog, now: int) -> None:
    """Name and description at any time; flavor and engine while it has no session."""
    values: dict[str, str] = {}
    if body.name is not None:
        values["name"] = body.name
    if body.description is not None:
        values["description"] = body.description
    if body.flavor is not None or body.image_id is not None:
        if nb.state not in notebooks.STARTABLE:
            raise errors.InvalidState(
                f"notebook '{nb.id}' is {nb.state}: stop it to change its flavor or engine")
        # (its pool, which does not change, was checked when it was made)
        flavor_id, _pool = check_placement(cat, body.flavor or nb.flavor_id, nb.pool_id,
                                           body.image_id or nb.image_id, shared_fs=True)
        values["flavor_id"] = flavor_id
        values["image_id"] = body.image_id or nb.image_id
    if values and not notebook_repo.update(conn, nb, now, **values):
        raise errors.InvalidState(f"notebook '{nb.id}' changed meanwhile; try again")
    if values:
        changed = ", ".join(f"{k} {v}" for k, v in values.items())
        kind_repo.add_event(conn, notebooks.KIND, nb.id, now, f"Changed: {changed}")


def start(conn: sa.Connection, nb: kind_rows.Notebook, *, settings: settings_mod.Settings,
          lease: notebooks.LeaseReq | None, duration: int | None, user_name: str,
          now: int) -> None:
    """A new session for a stopped notebook (with a new lease when one is given)."""
    if nb.state in (State.STARTING, State.RUNNING):
        return
    if nb.state not in notebooks.STARTABLE:
        raise errors.InvalidState(f"notebook '{nb.id}' is {nb.state}; it starts once stopped")
    lease_values: dict[str, Any] = {}
    if lease is not None or duration is not None:
        kind, ms = notebooks.lease_of(lease, duration, **_lease_defaults(settings))
        lease_values = {"lease_type": kind.value, "lease_ms": ms, "lease_updated_at": now}
    moved = notebook_repo.transition(
        conn, nb, to=State.STARTING, now=now,
        message=f"Session {nb.session + 1} started by {user_name or 'nobody'}",
        session=nb.session + 1, started_at=now, ready_at=None, stops_at=None,
        stop_requested_at=None, stop_reason=None, port=None, last_request_at=None,
        last_active_at=None, checked_at=None, **lease_values, **_secrets())
    if not moved:
        raise errors.InvalidState(f"notebook '{nb.id}' changed meanwhile; try again")


def stop(conn: sa.Connection, nb: kind_rows.Notebook, *, reason: str, now: int) -> None:
    """Stop its session (gracefully, by the controller); a stopped notebook stays so."""
    if nb.state in notebooks.STARTABLE or nb.state == State.STOPPING:
        return
    if nb.state not in notebooks.STOPPABLE or not notebook_repo.transition(
            conn, nb, to=State.STOPPING, now=now,
            message=f"Stopping: {reason}", stop_requested_at=now, stop_reason=reason):
        raise errors.InvalidState(f"notebook '{nb.id}' is {nb.state}; it cannot stop now")


def renew(conn: sa.Connection, nb: kind_rows.Notebook, *, lease: notebooks.LeaseReq | None,
          duration: int | None, settings: settings_mod.Settings, now: int) -> None:
    """A new lease from now: a running session with a timing lease stops at now +
    duration; an idle lease counts its duration from the latest activity."""
    if nb.state == State.DELETING:
        raise errors.InvalidState(f"notebook '{nb.id}' is being deleted")
    kind, ms = notebooks.lease_of(lease, duration, **_lease_defaults(settings))
    stops_at = now + ms if kind is notebooks.LeaseType.TIMING and nb.ready_at else None
    if not notebook_repo.update(conn, nb, now, lease_type=kind.value, lease_ms=ms,
                                lease_updated_at=now, stops_at=stops_at):
        raise errors.InvalidState(f"notebook '{nb.id}' changed meanwhile; try again")
    kind_repo.add_event(conn, notebooks.KIND, nb.id, now,
                        f"Lease renewed: {kind.value}, {notebooks.duration_words(ms)}")


def delete(conn: sa.Connection, nb: kind_rows.Notebook, *, user_name: str, now: int) -> None:
    """Stop its session and remove it (its workspace folder stays)."""
    if nb.state == State.DELETING:
        return
    if not notebook_repo.transition(conn, nb, to=State.DELETING,
                                    now=now,
                                    message=f"Deleted by {user_name or 'nobody'}",
                                    stop_requested_at=now):
        raise errors.InvalidState(f"notebook '{nb.id}' changed meanwhile; try again")


def redeem(conn: sa.Connection, notebook_id: str, token: str, now: int) -> str | None:
    """The cookie value that the notebook's one-time URL token `token` opens (and a new
    token for its URL), or None when the token is not the current one."""
    nb = notebook_repo.by_id(conn, notebook_id)
    if (nb is None or nb.state not in notebooks.LIVE or not nb.access_token
            or not nb.cookie_secret
            or not hmac.compare_digest(nb.access_token.encode(), token.encode())):
        return None
    if not notebook_repo.update(conn, nb, now, access_token=session.new_secret()):
        return None
    return nb.cookie_secret


def volume(nb: kind_rows.Notebook) -> dict[str, object]:
    """The notebook's volume as ModelArts shows one: the workspace is its mount path."""
    asked = notebooks.VolumeReq.model_validate(json.loads(nb.volume))
    out: dict[str, object] = {"category": asked.category, "ownership": asked.ownership,
                              "mount_path": nb.workspace, "status": "READY"}
    if asked.uri:
        out["uri"] = asked.uri
    if asked.capacity is not None:
        out["capacity"] = asked.capacity
    return out



# --- what the API calls: each in a transaction of its own ---------------------------------

#: a change to one notebook: `change(conn, notebook, now)`
Change = Callable[[sa.Connection, kind_rows.Notebook, int], None]


def make(rt: runtime.Runtime, body: notebooks.NotebookCreate, *, project_id: str,
         user_name: str, now: int) -> kind_rows.Notebook:
    """`create` in a transaction of its own; the notebook as made."""
    with rt.store.begin() as conn:
        notebook_id = create(conn, body, settings=rt.settings, cat=rt.catalog,
                             policy=rt.path_policy(conn, project_id), project_id=project_id,
                             user_name=user_name, now=now)
        return notebook_repo.get(conn, project_id, notebook_id)


def _by(rt: runtime.Runtime, project_id: str, notebook_id: str, caller: identity.Principal,
        change: Change) -> kind_rows.Notebook:
    """`change` by the notebook's owner or a project admin; the notebook after it."""
    now = rt.now()
    with rt.store.begin() as conn:
        nb = notebook_repo.get(conn, project_id, notebook_id)
        caller.may_change_job(project_id, nb.user_name, "notebook")
        change(conn, nb, now)
        return notebook_repo.by_id(conn, notebook_id) or nb


def change(rt: runtime.Runtime, project_id: str, notebook_id: str, caller: identity.Principal,
           body: notebooks.NotebookUpdate) -> kind_rows.Notebook:
    return _by(rt, project_id, notebook_id, caller, lambda conn, nb, now:
               update(conn, nb, body, cat=rt.catalog, now=now))


def start_by(rt: runtime.Runtime, project_id: str, notebook_id: str,
             caller: identity.Principal, *, lease: notebooks.LeaseReq | None,
             duration: int | None) -> kind_rows.Notebook:
    return _by(rt, project_id, notebook_id, caller, lambda conn, nb, now:
               start(conn, nb, settings=rt.settings, lease=lease, duration=duration,
                     user_name=caller.user_name, now=now))


def stop_by(rt: runtime.Runtime, project_id: str, notebook_id: str,
            caller: identity.Principal) -> kind_rows.Notebook:
    return _by(rt, project_id, notebook_id, caller, lambda conn, nb, now:
               stop(conn, nb, reason=f"stopped by {caller.user_name}", now=now))


def renew_by(rt: runtime.Runtime, project_id: str, notebook_id: str,
             caller: identity.Principal, *, lease: notebooks.LeaseReq | None,
             duration: int | None) -> kind_rows.Notebook:
    return _by(rt, project_id, notebook_id, caller, lambda conn, nb, now:
               renew(conn, nb, lease=lease, duration=duration, settings=rt.settings, now=now))


def delete_by(rt: runtime.Runtime, project_id: str, notebook_id: str,
              caller: identity.Principal) -> kind_rows.Notebook:
    return _by(rt, project_id, notebook_id, caller, lambda conn, nb, now:
               delete(conn, nb, user_name=caller.user_name, now=now))


def open_url(rt: runtime.Runtime, notebook_id: str, token: str) -> str | None:
    """`redeem` in a transaction of its own."""
    with rt.store.begin() as conn:
        return redeem(conn, notebook_id, token, rt.now())


def used(rt: runtime.Runtime, notebook_id: str) -> None:
    """Count now as activity of the notebook (an idle lease starts again from it)."""
    with rt.store.begin() as conn:
        notebook_repo.touch(conn, notebook_id, rt.now())
