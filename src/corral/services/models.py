"""Changes to the model registry that users ask for: aliases moved and dropped, versions
and models deleted with their files, each in a transaction of its own.

(A version is registered by `finishing.register`, when a job ends or on request.) Files
are removed after their rows are gone: a removal that fails leaves files nothing names,
logged, rather than a version whose files are half gone.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import sqlalchemy as sa

from corral.domain import errors, identity, versions
from corral.services import runtime
from corral.storage import objects
from corral.store import identity_repo, model_repo, rows

log = logging.getLogger(__name__)


def resolve(conn: sa.Connection, model: rows.Model, ref: str) -> rows.ModelVersion:
    """A version of the model by number (3, V0003), alias or `latest`."""
    if ref == "latest":
        return model_repo.resolve(conn, model)
    if ref[:1].isdigit() or (ref[:1] in "vV" and ref[1:].isdigit()):
        return model_repo.resolve(conn, model, versions.parse(ref))
    return model_repo.resolve(conn, model, alias=ref)


def set_alias(rt: runtime.Runtime, project_id: str, model_name: str, alias: str,
              version: int, caller: identity.Principal) -> rows.Model:
    """Point `alias` at a version of the model (moving it from the one it named before);
    the model."""
    with rt.store.begin() as conn:
        identity_repo.require_project(conn, project_id)
        model = model_repo.get(conn, project_id, model_name)
        model_repo.resolve(conn, model, version)
        model_repo.set_alias(conn, model.id, alias, version, rt.now(),
                             user_name=caller.user_name)
        return model


def drop_alias(rt: runtime.Runtime, project_id: str, model_name: str, alias: str,
               caller: identity.Principal) -> rows.Model:
    """Remove one of the model's aliases (NotFound when it has none of that name); the
    model."""
    with rt.store.begin() as conn:
        identity_repo.require_project(conn, project_id)
        model = model_repo.get(conn, project_id, model_name)
        if not model_repo.drop_alias(conn, model.id, alias, now=rt.now(),
                                     user_name=caller.user_name):
            raise model_repo.ModelNotFound(f"model '{model_name}' has no alias '{alias}'")
        return model


def delete_version(rt: runtime.Runtime, project_id: str, model_name: str, ref: str,
                   caller: identity.Principal) -> None:
    """Delete a version (by `resolve`'s reference) and its files; aliases naming it go too.
    Its number is not reused."""
    with rt.store.begin() as conn:
        identity_repo.require_project(conn, project_id)
        model = model_repo.get(conn, project_id, model_name)
        row = resolve(conn, model, ref)
        model_repo.delete_version(conn, model.id, row.version, now=rt.now(),
                                  user_name=caller.user_name)
    _remove_files(rt, project_id, [row.location])


def delete_model(rt: runtime.Runtime, project_id: str, model_name: str) -> None:
    """Delete the model, every version of it and their files."""
    with rt.store.begin() as conn:
        identity_repo.require_project(conn, project_id)
        model = model_repo.get(conn, project_id, model_name)
        locations = [v.location for v in model_repo.versions(conn, model.id)]
        model_repo.delete_model(conn, model.id)
    _remove_files(rt, project_id, locations)


def _remove_files(rt: runtime.Runtime, project_id: str, locations: Sequence[str]) -> None:
    assert rt.stores is not None
    for location in locations:
        try:
            objects.remove_tree(rt.stores.open(location, project_id))
        except (OSError, errors.CorralError) as exc:  # the rows are gone; say so, go on
            log.warning("could not remove model files at %s: %s", location, exc)
