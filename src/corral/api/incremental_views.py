"""How an incremental-learning job looks to API clients: its spec, and a status with its
rounds, its deploys and Sedna-style conditions of the stage it is in."""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
from pydantic import Field

from corral.api import schemas
from corral.domain.incremental import loopspec, samples, states
from corral.kinds import owned
from corral.kinds.incremental import actions, common, current, rounds
from corral.store import dataset_repo, job_repo, kind_rows, loop_repo

LS, RS, DS = states.LoopState, states.RoundState, states.DeployState


class LoopMetadataOut(schemas.Out):
    id: str
    name: str
    description: str = ""
    create_time: int
    update_time: int
    user_name: str = ""


class LoopStatusOut(schemas.Out):
    state: str = Field(description="Waiting, Training, Evaluating, Deploying, Stopped, Failed")
    rounds: list[dict[str, Any]] = Field(description="every round: trigger, jobs, evaluation "
                                         "set hash, metrics, verdict and rule, deploy")
    conditions: list[dict[str, Any]] = Field(description="Sedna-style conditions of the "
                                             "current stage")


class LoopOut(schemas.Out):
    kind: str = "IncrementalLearningJob"
    metadata: LoopMetadataOut
    spec: dict[str, Any]
    status: LoopStatusOut


class LoopsOut(schemas.Out):
    total: int
    items: list[LoopOut]


def loop(conn: sa.Connection, row: kind_rows.Loop, now: int, *, full: bool = True
         ) -> dict[str, Any]:
    spec = common.spec_of(row)
    records = loop_repo.rounds_of(conn, row.id)
    deploys = loop_repo.deploys_of(conn, row.id)
    by_seq = {d.seq: d for d in deploys}
    dataset = dataset_repo.by_id(conn, row.dataset_id)
    pool = common.pool_of(row)
    target = current.alias_target(conn, row, spec)
    service = actions.service_job(conn, row)
    status: dict[str, Any] = {
        "state": row.state, "message": row.message, "stage": _stage(row),
        "rounds_started": row.rounds, "failed_rounds": row.failed_rounds,
        "num_of_samples": pool.num_of_samples, "eval_samples": samples.count(pool.evals),
        "eval_versions": len(pool.evals),
        "dataset": {"name": dataset.name if dataset else None,
                    "number_of_samples": dataset.number_of_samples if dataset else None,
                    "split": pool.split_upto},
        "next_check_time": row.next_check_at if row.state in states.LIVE else None,
        "not_before": row.not_before,
        "model": {"name": spec.model_name, "alias": spec.deploySpec.model.alias,
                  "version": target,
                  "initial": f"{row.initial_model} v{row.initial_version}"},
        "service": None if service is None else {
            "job_id": service.id, "job_name": service.name, "phase": service.phase},
        "conditions": conditions(conn, row, spec, records, by_seq, now),
        "rounds": [round_(r, by_seq.get(r.deploy_seq or 0), common.owner(row))
                   for r in records] if full else [],
        "deploys": [deploy(d) for d in deploys] if full else [],
    }
    return {"kind": "IncrementalLearningJob",
            "metadata": {"id": row.id, "name": row.name, "description": row.description,
                         "create_time": row.created_at, "update_time": row.updated_at,
                         "user_name": row.user_name},
            "spec": json.loads(row.spec), "status": status}


def _stage(row: kind_rows.Loop) -> str:
    return {LS.EVALUATING: "Eval", LS.DEPLOYING: "Deploy"}.get(LS(row.state), "Train")


def round_(r: kind_rows.Round, d: kind_rows.Deploy | None, owner: owned.Owner) -> dict[str, Any]:
    def name(job_id: str | None, stage: str) -> str | None:
        return owned.job_name(owner, rounds.role(r.number, stage)) if job_id else None

    return {
        "number": r.number, "state": r.state, "start_time": r.started_at,
        "end_time": r.ended_at, "trigger": json.loads(r.trigger),
        "train_samples": r.train_samples, "eval_samples": r.eval_samples,
        "eval_set_hash": r.eval_hash or None,
        "base_model": f"{r.base_model} v{r.base_version}" if r.base_model else None,
        "current_model": (f"{r.current_model} v{r.current_version}"
                          if r.current_model else None),
        "new_version": r.new_version, "train_job_id": r.train_job_id,
        "train_job_name": name(r.train_job_id, "train"), "eval_job_id": r.eval_job_id,
        "eval_job_name": name(r.eval_job_id, "eval"),
        "metrics": {"new": json.loads(r.metrics_new or "{}"),
                    "current": json.loads(r.metrics_current or "{}")},
        "decision": r.decision, "rule": r.rule, "message": r.message,
        "deploy": deploy(d) if d else None,
    }


def deploy(d: kind_rows.Deploy) -> dict[str, Any]:
    return {"seq": d.seq, "round": d.round, "model": f"{d.model_name} v{d.version}",
            "state": d.state, "model_update_time": d.token, "reason": d.reason,
            "user_name": d.user_name, "moves_alias": d.moves_alias,
            "service_role": d.service_role, "create_time": d.created_at,
            "written_time": d.written_at, "deadline": d.deadline,
            "acknowledged_time": d.ended_at if d.state == DS.LOADED else None,
            "end_time": d.ended_at, "message": d.message}


def _cond(stage: str, kind: str, time: int | None, message: str = "",
          reason: str = "") -> dict[str, Any]:
    return {"stage": stage, "type": kind, "reason": reason, "message": message,
            "lastTransitionTime": time}


def conditions(conn: sa.Connection, row: kind_rows.Loop, spec: loopspec.LoopSpec,
               records: list[kind_rows.Round], by_seq: dict[int, kind_rows.Deploy],
               now: int) -> list[dict[str, Any]]:
    """The stages of the latest round as Sedna's conditions (Waiting, Running, Completed,
    Failed), and Train/Waiting while the loop waits for its trigger. A round whose model
    lost is Deploy/Rejected, not Completed."""
    out: list[dict[str, Any]] = []
    rnd = records[-1] if records else None
    if rnd is not None:
        out += _round_conditions(conn, rnd, by_seq.get(rnd.deploy_seq or 0))
    if row.state == LS.WAITING:
        trig = spec.trainSpec.trigger
        rule = trig.condition.describe() if trig.condition else "num_of_samples > 0"
        pool = common.pool_of(row)
        out.append(_cond("Train", "Waiting", row.updated_at,
                         f"num_of_samples is {pool.num_of_samples}; a round starts when "
                         f"{rule}" + (f" between {trig.timer.start} and {trig.timer.end}"
                                      if trig.timer else ""),
                         "BackingOff" if row.not_before and now < row.not_before else ""))
    elif row.state in (LS.STOPPED, LS.FAILED):
        out.append(_cond("Train", row.state, row.updated_at, row.message or ""))
    return out


def _round_conditions(conn: sa.Connection, rnd: kind_rows.Round,
                      d: kind_rows.Deploy | None) -> list[dict[str, Any]]:
    out = [_job_cond(conn, "Train", rnd.train_job_id, rnd.started_at)]
    if rnd.eval_job_id:
        out.append(_job_cond(conn, "Eval", rnd.eval_job_id, rnd.started_at))
    if rnd.state == RS.REJECTED:
        out.append(_cond("Deploy", "Rejected", rnd.ended_at, rnd.rule or "", "ConditionFailed"))
    elif rnd.state == RS.FAILED or rnd.state == RS.STOPPED:
        out.append(_cond(_failed_stage(rnd), "Failed" if rnd.state == RS.FAILED else "Stopped",
                         rnd.ended_at, rnd.message or ""))
    elif rnd.decision == "promote":
        if d is None:
            out.append(_cond("Deploy", "Waiting", rnd.started_at, "waiting for the deploy "
                             "trigger's window"))
        else:
            kind = {DS.LOADED: "Completed", DS.FAILED: "Failed"}.get(DS(d.state), "Running")
            message = d.message or ("waiting for the service to acknowledge loading it"
                                    if d.state == DS.PENDING else "writing the model")
            out.append(_cond("Deploy", kind, d.ended_at or d.written_at or d.created_at,
                             message))
    return out


def _failed_stage(rnd: kind_rows.Round) -> str:
    if rnd.deploy_seq is not None or rnd.decision:
        return "Deploy"
    return "Eval" if rnd.eval_job_id else "Train"


def _job_cond(conn: sa.Connection, stage: str, job_id: str | None,
              since: int) -> dict[str, Any]:
    job = job_repo.job_by_id(conn, job_id) if job_id else None
    if job is None:
        return _cond(stage, "Failed" if job_id else "Waiting", since)
    kind = {"Completed": "Completed", "Failed": "Failed", "Abnormal": "Failed",
            "Terminated": "Failed", "Running": "Running"}.get(job.phase, "Starting")
    return _cond(stage, kind, job.end_time or job.start_time or job.create_time,
                 f"job {job.name} ({job.id}) is {job.phase}", job.phase)
