"""The incremental-learning loop's controller: Sedna's IncrementalLearningJob on corral.

A loop watches a dataset; when its train trigger holds it starts a round: a training job
from the current model on the round's new samples, an evaluation job of the new and the
current model on the same frozen samples, and, when the deploy condition holds, a deploy
of the new model to the loop's inference service (which acknowledges loading it) and the
move of the model's alias. Then it waits again.

- `controller.py`: the pass (a `kinds.loop.Controller`) over the loops with work to do;
- `checks.py`: counting the dataset, splitting new samples, the train trigger;
- `rounds.py`: a round from its start to its verdict;
- `deploys.py`: writing a model for the service, its acknowledgement, the alias;
- `bodies.py`, `layout.py`, `current.py`: the jobs' bodies, where files go, which model
  is current;
- `actions.py`: what users do (create, trigger, stop, resume, promote, rollback, delete).

Every state change is a guarded transition in the same transaction as the job it submits
(`kinds.owned.submit`, one job per role such as `round-3/train`), and every file is
written before the transaction that relies on it, so a server killed at any moment goes
on where it was and never makes a job twice.
"""

from __future__ import annotations

from corral.kinds.incremental import controller
from corral.services import runtime
from corral.store import db


def controller_for(store: db.Store, services: runtime.Runtime) -> controller.Controller:
    """The incremental-learning controller, as the server runs it (writing to `store`)."""
    return controller.Controller(store, services, services.stores)
