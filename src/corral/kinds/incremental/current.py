"""Which model a loop's rounds start from and compare with.

The current model is the version the loop's alias (`production`, or deploySpec.model.alias)
names on the loop's model; until that alias names one, it is the initial model, pinned
when the loop was made. A round trains from the current model and judges the new one
against it, or against evalSpec.initialModel until the loop has promoted a model (Sedna v2).
"""

from __future__ import annotations

import dataclasses

import sqlalchemy as sa

from corral.domain import errors
from corral.domain.incremental import loopspec
from corral.store import kind_rows, model_repo


@dataclasses.dataclass(frozen=True)
class ModelAt:
    name: str
    version: int
    location: str  #: where its files are in the model store (a folder or an s3:// URL)

    def __str__(self) -> str:
        return f"{self.name} v{self.version}"


def version(conn: sa.Connection, project_id: str, name: str, number: int) -> ModelAt:
    """A model version, or errors.NotFound saying which is missing."""
    model = model_repo.get(conn, project_id, name)
    row = model_repo.resolve(conn, model, number)
    return ModelAt(name=name, version=row.version, location=row.location)


def alias_target(conn: sa.Connection, loop: kind_rows.Loop, spec: loopspec.LoopSpec) -> int | None:
    """The version the loop's alias names on its model, if it names one."""
    try:
        model = model_repo.get(conn, loop.project_id, spec.model_name)
    except errors.NotFound:
        return None
    return model_repo.aliases(conn, model.id).get(spec.deploySpec.model.alias)


def current(conn: sa.Connection, loop: kind_rows.Loop, spec: loopspec.LoopSpec) -> ModelAt:
    target = alias_target(conn, loop, spec)
    if target is not None:
        return version(conn, loop.project_id, spec.model_name, target)
    return version(conn, loop.project_id, loop.initial_model, loop.initial_version)


def baseline(conn: sa.Connection, loop: kind_rows.Loop, spec: loopspec.LoopSpec,
             promoted: bool) -> ModelAt:
    """What a round's new model is judged against."""
    if loop.eval_model is not None and loop.eval_version is not None and not promoted:
        return version(conn, loop.project_id, loop.eval_model, loop.eval_version)
    return current(conn, loop, spec)


def pin(conn: sa.Connection, project_id: str, ref: loopspec.ModelRef) -> ModelAt:
    """A model reference of a spec, resolved to a version (BadParameter when missing)."""
    try:
        model = model_repo.get(conn, project_id, ref.name)
        row = model_repo.resolve(conn, model, ref.version, ref.alias)
    except errors.NotFound as exc:
        raise errors.BadParameter(exc.message) from None
    return ModelAt(name=ref.name, version=row.version, location=row.location)
