"""The model a pipeline saves when it succeeds: its `model` task's output channel,
registered as a training job's model is (`services.finishing.register`), from the job of
that task's run. Registering again after a crash finds the version made the first time.
"""

from __future__ import annotations

import dataclasses

from corral.domain.pipelines import spec, status
from corral.kinds.pipelines import common
from corral.services import finishing
from corral.store import job_repo, kind_rows, pipeline_repo


@dataclasses.dataclass(frozen=True)
class NotYet:
    """The run's job is not finished with yet (its final metrics, its last upload)."""


def register(platform: common.Platform, p: kind_rows.Pipeline, attempt: int,
             model: spec.ModelSave, now: int) -> tuple[str, int] | NotYet | str:
    """(model, version) registered; NotYet; or why it cannot be."""
    with platform.store.read() as conn:
        run = next((r for r in pipeline_repo.runs_of(conn, p.id, attempt)
                    if r.key == model.task), None)
        job = job_repo.job_by_id(conn, run.job_id) if run and run.job_id else None
    if run is None or status.TaskState(run.state) not in status.GOOD:
        return f"task {model.task} ended {run.state if run else 'without running'}"
    if job is None:
        return f"the training job that made {model.task}'s outputs is gone"
    if run.metrics is None or job.finalized_at is None:
        return NotYet()
    try:
        version = finishing.register(platform.store, platform.stores, platform.settings, job,
                                     model.name, model.channel, lambda: now)
    except Exception as exc:  # any store's failure (botocore raises its own types)
        return str(getattr(exc, "message", None) or exc) or type(exc).__name__
    return version.model_name, version.version
