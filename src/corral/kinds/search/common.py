"""What the searches' controller and actions share: the platform's pieces, a search's
owner, its trials' roles and bodies."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping

from corral import settings as settings_mod
from corral.domain import models, specs
from corral.domain.search import spec
from corral.kinds import owned
from corral.kinds.search import rewards
from corral.services import runtime
from corral.storage import objects
from corral.store import db, kind_rows, rows, search_repo

KIND = search_repo.KIND


@dataclasses.dataclass(frozen=True)
class Platform:
    """What searches need of the server: the store, the services (that submit their
    jobs), the settings (runs), the object stores (model registration), the trials'
    reward reader."""

    store: db.Store
    services: runtime.Runtime
    settings: settings_mod.Settings
    stores: objects.Stores
    rewards: rewards.Reader


def owner(job: rows.Job) -> owned.Owner:
    """The search job `job` as the owner of its trials."""
    return owned.Owner(kind=KIND, id=job.id, project_id=job.project_id,
                       user_name=job.user_name, name=job.name)


def role(number: int) -> str:
    return f"trial-{number}"


def search_of(s: kind_rows.Search) -> spec.Search:
    return spec.check(json.loads(s.policy))


def trial_body(job: rows.Job, number: int, params: Mapping[str, str]) -> specs.JobCreate:
    """The job of trial `number`: the search job's, without the search policy, with the
    sampled parameters given as its parameters (`--name=value`), its outputs under
    `trial-<number>/` of the search's, and no model registered (the search registers its
    best trial's)."""
    body = specs.JobCreate.model_validate_json(job.spec)
    alg = body.algorithm
    alg.policies = {k: v for k, v in (alg.policies or {}).items() if k != "auto_search"} \
        or None
    alg.parameters = [p for p in alg.parameters if p.name not in params] + [
        specs.Parameter(name=k, value=v) for k, v in params.items()]
    for out in alg.outputs:
        out.remote.obs.obs_url = objects.join(out.url, role(number)) + "/"
        out.local_dir = None
    for ch in alg.inputs:
        ch.local_dir = None
    body.metadata.annotations = {**body.metadata.annotations,
                                 models.WHEN_ANNOTATION: "never"}
    return body
