"""The states of a loop, of each of its rounds, and of each deploy to its service.

A loop waits for its train trigger, then runs one round at a time through training,
evaluation and (when the new model wins) deployment, and waits again. Its rows move only
through guarded transitions (`store/kind_repo.transition`), along the tables here (each
drawn in docs/incremental-learning.md).
"""

from __future__ import annotations

import enum

from corral.domain import machines

#: the job kind of a loop (the `owner_kind` of its jobs, the `kind` of its events)
KIND = "incremental_learning"


class LoopState(enum.StrEnum):
    WAITING = "Waiting"  #: for its train trigger (or for a backoff after a failed round)
    TRAINING = "Training"  #: a round's train job runs
    EVALUATING = "Evaluating"  #: a round's evaluation job runs
    DEPLOYING = "Deploying"  #: a model is being deployed (a round's, a promotion, a rollback)
    STOPPED = "Stopped"  #: stopped by a user; `resume` sets it going again
    FAILED = "Failed"  #: maxFailedRounds rounds failed in a row; `resume` sets it going again


_L = LoopState
#: loop state -> the states it may move to. A failed round leaves the loop Waiting (for
#: its backoff) from wherever the round was, Waiting itself included (a round that could
#: not start); a by-hand deploy goes from Waiting to Deploying.
LOOP_TRANSITIONS: dict[LoopState, frozenset[LoopState]] = {
    _L.WAITING: frozenset({_L.TRAINING, _L.DEPLOYING, _L.WAITING, _L.FAILED, _L.STOPPED}),
    _L.TRAINING: frozenset({_L.EVALUATING, _L.WAITING, _L.FAILED, _L.STOPPED}),
    _L.EVALUATING: frozenset({_L.DEPLOYING, _L.WAITING, _L.FAILED, _L.STOPPED}),
    _L.DEPLOYING: frozenset({_L.WAITING, _L.FAILED, _L.STOPPED}),
    _L.STOPPED: frozenset({_L.WAITING}),
    _L.FAILED: frozenset({_L.WAITING}),
}
#: the state a new loop is made in
LOOP_START = LoopState.WAITING

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


_R = RoundState
#: round state -> the states it may move to
ROUND_TRANSITIONS: dict[RoundState, frozenset[RoundState]] = {
    _R.TRAINING: frozenset({_R.EVALUATING, _R.FAILED, _R.STOPPED}),
    _R.EVALUATING: frozenset({_R.DEPLOYING, _R.REJECTED, _R.FAILED, _R.STOPPED}),
    _R.DEPLOYING: frozenset({_R.PROMOTED, _R.FAILED, _R.STOPPED}),
    _R.PROMOTED: frozenset(),
    _R.REJECTED: frozenset(),
    _R.FAILED: frozenset(),
    _R.STOPPED: frozenset(),
}
#: the state a new round is made in
ROUND_START = RoundState.TRAINING
ROUND_OPEN = frozenset(ROUND_TRANSITIONS) - machines.ended(ROUND_TRANSITIONS)


class DeployState(enum.StrEnum):
    WRITING = "Writing"  #: the model's files and model_config.json are being written
    PENDING = "Pending"  #: written; waiting for the service to say it loaded them
    LOADED = "Loaded"  #: the service acknowledged loading the model
    FAILED = "Failed"  #: the service reported a failure, or no acknowledgement came in time
    SUPERSEDED = "Superseded"  #: a later deploy (or a stop) replaced it before it was loaded


_D = DeployState
#: deploy state -> the states it may move to (with no service to load it, a written model
#: is Loaded at once)
DEPLOY_TRANSITIONS: dict[DeployState, frozenset[DeployState]] = {
    _D.WRITING: frozenset({_D.PENDING, _D.LOADED, _D.FAILED, _D.SUPERSEDED}),
    _D.PENDING: frozenset({_D.LOADED, _D.FAILED, _D.SUPERSEDED}),
    _D.LOADED: frozenset(),
    _D.FAILED: frozenset(),
    _D.SUPERSEDED: frozenset(),
}
#: the state a new deploy is made in
DEPLOY_START = DeployState.WRITING
DEPLOY_OPEN = frozenset(DEPLOY_TRANSITIONS) - machines.ended(DEPLOY_TRANSITIONS)
