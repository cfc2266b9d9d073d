"""Hyperparameter searches: a training job with `algorithm.policies.auto_search` runs as
trials, ordinary training jobs it owns (`kinds/owned.py`), sampled and stopped early by
Optuna's samplers and pruners. The rules (the policy, the algorithms, the trial states)
are pure and live in `domain.search`. The modules:

- `controller`: the pass over every search not ended (`Controller`);
- `study`: the algorithms as Optuna's, over a study rebuilt from the database;
- `rewards`: a trial's rewards, from its reported metrics or its log;
- `ending`: how a search ends, its best trial's model registered;
- `actions`: what users and the API do (trials tables, early stop, importance, plots);
- `common`: what those share.
"""

from __future__ import annotations

from corral.kinds.search import common, controller, rewards
from corral.services import runtime
from corral.storage import objects
from corral.store import db


def controller_for(store: db.Store, services: runtime.Runtime) -> controller.Controller:
    """The searches' controller, as the server runs it (writing to `store`)."""
    settings = services.settings
    return controller.Controller(common.Platform(
        store=store, services=services, settings=settings,
        stores=services.stores or objects.Stores(settings),
        rewards=rewards.Reader(settings.runs_dir)))
