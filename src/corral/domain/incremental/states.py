"""The states of a loop, of each of its rounds, and of each deploy to its service.

A loop waits for its train trigger, then runs one round at a time through training,
evaluation and (when the new model wins) deployment, and waits again. Its rows move only
through guarded transitions (`store/kind_repo.transition`), from the states listed here.
"""

from __future__ import annotations

import enum

#: the job kind of a loop (the `owner_kind` of its jobs, the `kind` of its events)
KIND = "incremental_learning"


class LoopState(enum.StrEnum):
    WAITING = "Waiting"  #: for its train trigger (or for a backoff after a failed round)
    TRAINING = "Training"  #: a round's train job runs
    EVALUATING = "Evaluating"  #: a round's evaluation job runs
    DEPLOYING = "Deploying"  #: a model is being deployed (a round's, a promotion, a rollback)
    STOPPED = "Stopped"  #: stopped by a user; `resume` sets it going again
    FAILED = "Failed"  #: maxFailedRounds rounds failed in a row; `resume` sets it going again


#: states in which the controller moves a loop along
LIVE = frozenset({LoopState.WAITING, LoopState.TRAINING, LoopState.EVALUATING,
                  LoopState.DEPLOYING})
#: states in which a round is under way
IN_ROUND = frozenset({LoopState.TRAINING, LoopState.EVALUATING, LoopState.DEPLOYING})


class RoundState(enum.StrEnum):
    TRAINING = "Training"
    EVALUATING = "Evaluating"
    DEPLOYING = "Deploying"  #: the new model won; it is being deployed
    PROMOTED = "Promoted"  #: the service loaded the new model; the alias names it
    REJECTED = "Rejected"  #: the deploy condition did not hold; the current model stays
    FAILED = "Failed"  #: a job failed, the evaluation was unusable, or the deploy failed
    STOPPED = "Stopped"  #: the loop was stopped during the round


ROUND_OPEN = frozenset({RoundState.TRAINING, RoundState.EVALUATING, RoundState.DEPLOYING})


class DeployState(enum.StrEnum):
    WRITING = "Writing"  #: the model's files and model_config.json are being written
    PENDING = "Pending"  #: written; waiting for the service to say it loaded them
    LOADED = "Loaded"  #: the service acknowledged loading the model
    FAILED = "Failed"  #: the service reported a failure, or no acknowledgement came in time
    SUPERSEDED = "Superseded"  #: a later deploy (or a stop) replaced it before it was loaded


DEPLOY_OPEN = frozenset({DeployState.WRITING, DeployState.PENDING})
