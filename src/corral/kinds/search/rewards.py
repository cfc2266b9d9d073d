"""A trial's reward as it goes: what it reported by `corral.job.log_metrics` under the
reward's name, else what its log says by the reward's regex (ModelArts' way: no change to
the training code). Each value is an intermediate reward at a step (a regex match's step
is its count); the last one is the trial's reward.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import re

import sqlalchemy as sa

from corral.domain import jobs
from corral.domain.search import spec, trials
from corral.oskit import beneath
from corral.storage import runs
from corral.store import job_repo, rows, version_repo

#: at most this much of a log is read per pass (the rest on the next)
CHUNK = 4 * 1024 * 1024


@dataclasses.dataclass
class _Read:
    """How far a trial's log was read, and the rewards found in it."""

    position: int = 0
    partial: bytes = b""
    values: list[float] = dataclasses.field(default_factory=list)


class Reader:
    """Reads trials' rewards; remembers how far each log was read (a restart reads the
    logs again from their start: the same values)."""

    def __init__(self, runs_dir: pathlib.Path) -> None:
        self.runs_dir = runs_dir
        self._logs: dict[tuple[str, int], _Read] = {}

    def read(self, conn: sa.Connection, search: spec.Search,
             job: rows.Job) -> tuple[dict[int, float], bool]:
        """(step -> intermediate reward of the job's latest attempt, whether they are all
        there is to read). What a job reports through log_metrics is stored by the storage
        component, whose last read of an ended job is done when it marks it finished; its
        log is read here, all of it once the job has ended."""
        reported = [p for p in version_repo.points_of(conn, job.id, "worker-0")
                    if p.name == search.reward]
        ended = jobs.Phase(job.phase) in jobs.TERMINAL
        if reported or not search.regex:
            latest = max((p.attempt for p in reported), default=0)
            return ({p.step if p.step is not None else i: p.value
                     for i, p in enumerate(q for q in reported if q.attempt == latest)},
                    ended and job.finalized_at is not None)
        attempt = job_repo.latest_attempt(conn, job.id)
        if not attempt:
            return {}, ended
        found = self._from_log(job.id, attempt, re.compile(search.regex), ended)
        if not found and ended and job.finalized_at is None:
            return {}, False  # it may yet have reported through log_metrics
        return dict(enumerate(found)), ended

    def _from_log(self, job_id: str, attempt: int, pattern: re.Pattern[str],
                  ended: bool) -> list[float]:
        values = self._read_log(job_id, attempt, pattern)
        state = self._logs[(job_id, attempt)]
        if ended and state.partial:  # its last line, without its newline
            last = trials.reward_in(pattern, state.partial.decode("utf-8", "replace"))
            if last is not None:
                return [*values, last]
        return values

    def _read_log(self, job_id: str, attempt: int, pattern: re.Pattern[str]) -> list[float]:
        state = self._logs.setdefault((job_id, attempt), _Read())
        path = runs.RunPaths(self.runs_dir, job_id).log_path(attempt, "worker-0")
        try:
            fd = beneath.open_file(path)
        except OSError:
            return state.values
        try:
            data = os.pread(fd, CHUNK, state.position)
        finally:
            os.close(fd)
        state.position += len(data)
        *lines, state.partial = (state.partial + data).split(b"\n")
        for line in lines:
            value = trials.reward_in(pattern, line.decode("utf-8", "replace"))
            if value is not None:
                state.values.append(value)
        return state.values

    def forget(self, job_ids: set[str]) -> None:
        """Drop what was read of these jobs' logs (their trials ended)."""
        for key in [k for k in self._logs if k[0] in job_ids]:
            del self._logs[key]
