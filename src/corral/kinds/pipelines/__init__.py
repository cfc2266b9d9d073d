"""Pipelines: DAGs of training jobs, with FATE Flow's status rules and rerun from failure.

A pipeline's tasks are ordinary training jobs the pipeline owns (`kinds/owned.py`),
submitted one by one as the graph allows; the rules (the graph, the trigger rules, the
status, `when`) are pure and live in `domain.pipelines`. The modules:

- `controller`: the pass over every pipeline with work to do (`Controller`);
- `starting`: a run's job built and submitted, or an earlier identical run reused;
- `caching`: the content hashes a run's cache key is made of;
- `saving`: the model registered when a pipeline succeeds;
- `cleaning`: the intermediate outputs removed by `clean` and delete;
- `actions`: what users do (create, stop, rerun, clean, delete), for the API;
- `common`: what those share.
"""

from __future__ import annotations

from corral.kinds.pipelines import common, controller
from corral.services import runtime
from corral.storage import objects
from corral.store import db


def controller_for(store: db.Store, services: runtime.Runtime) -> controller.Controller:
    """The pipelines' controller, as the server runs it (writing to `store`)."""
    settings = services.settings
    return controller.Controller(common.Platform(
        store=store, services=services, settings=settings,
        stores=services.stores or objects.Stores(settings)))
