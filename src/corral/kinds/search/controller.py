"""The searches' controller: one pass over every search not ended.

A pass reads a search as the store holds it (its job, its trials, their jobs, what they
reported), and in one transaction: starts the search job, records the trials' progress,
ends the trials whose jobs ended, stops those the pruner (or the search's stop) gives up,
and submits new trials up to the number allowed at once, each with parameters the sampler
draws from a study rebuilt from the trials stored (study.py). When no trial is left to run
the search ends (ending.py). A server killed at any moment finds all of a pass or none.

study.py is imported by the first pass over a search, not with this module: Optuna and
NumPy, which it brings, are 17 MB of memory that a server with no search never needs; and
before that pass's transaction, since the import takes seconds.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging

import sqlalchemy as sa

from corral.domain import jobs
from corral.domain.search import algorithms, spec, trials
from corral.kinds import loop, owned
from corral.kinds.search import common, ending
from corral.store import job_repo, kind_repo, kind_rows, rows, search_repo

log = logging.getLogger(__name__)
State = trials.State


@dataclasses.dataclass
class View:
    """A search as one pass sees it."""

    s: kind_rows.Search
    search: spec.Search
    job: rows.Job
    stored: list[kind_rows.SearchTrial]
    trial_jobs: dict[str, rows.Job]
    reports: dict[int, dict[int, float]]
    #: trials whose job ended and whose reports are all read
    final: set[int]
    #: why a trial could not be submitted this pass
    refused: str | None = None

    @property
    def stopping(self) -> bool:
        return (self.job.phase == jobs.Phase.TERMINATING.value
                or self.job.deleted_at is not None)

    def job_of(self, t: kind_rows.SearchTrial) -> rows.Job | None:
        return self.trial_jobs.get(t.job_id)


class Controller:
    kind = common.KIND

    def __init__(self, platform: common.Platform) -> None:
        self.platform = platform

    def reconcile(self, now: int) -> bool:
        with self.platform.store.read() as conn:
            live = search_repo.live(conn)
        more = False
        for s in live:
            more = loop.isolated(self.platform.store, self.kind, s.job_id, now,
                                 functools.partial(self.one, s, now)) or more
        return more

    def one(self, s: kind_rows.Search, now: int) -> bool:
        """One pass over search `s`; True when another is due at once."""
        v = self._read(s)
        if v is None:
            return False
        # Loaded here, not in the transaction below that asks it: its first import takes
        # seconds (more on a busy machine), which would hold back every other writer, this
        # server's renewal of its leadership lease among them (on SQLite: a lease run out).
        from corral.kinds.search import study  # noqa: F401  (see the module's doc)
        with self.platform.store.begin() as conn:
            self._start(conn, v, now)
            asked = self._progress(conn, v, now)
            asked += self._stop_losers(conn, v, now)
            started = self._submit(conn, v, now) if not v.stopping else 0
        if asked or started:
            self.platform.services.wake()
        if all(State(t.state) in trials.ENDED for t in v.stored) and not started:
            return ending.end_if_done(self.platform, v.s, v.search, v.job, now, v.refused)
        return False

    def _read(self, s: kind_rows.Search) -> View | None:
        with self.platform.store.read() as conn:
            job = job_repo.job_by_id(conn, s.job_id)
            if job is None:
                return None
            stored = search_repo.trials_of(conn, s.job_id)
            owned_jobs = {j.id: j for j in
                          job_repo.owned_jobs(conn, common.KIND, s.job_id).values()}
            search = common.search_of(s)
            read = {t.number: self.platform.rewards.read(conn, search, owned_jobs[t.job_id])
                    for t in stored
                    if State(t.state) in trials.LIVE and t.job_id in owned_jobs}
        return View(s=s, search=search, job=job, stored=stored, trial_jobs=owned_jobs,
                    reports={n: r[0] for n, r in read.items()},
                    final={n for n, r in read.items() if r[1]})

    def _start(self, conn: sa.Connection, v: View, now: int) -> None:
        if v.job.phase != jobs.Phase.CREATING.value:
            return
        job_repo.transition(conn, v.job.id, jobs.Phase.PENDING, jobs.SecondaryPhase.QUEUING,
                            now=now, message="Search admitted: its trials queue as jobs")
        job_repo.transition(conn, v.job.id, jobs.Phase.RUNNING, jobs.SecondaryPhase.RUNNING,
                            now=now, fields={"start_time": now},
                            message=f"Search running: {v.search.trials} trial(s) of "
                                    f"{v.search.algorithm.name}, at most "
                                    f"{v.search.parallel} at once")
        search_repo.set_search(conn, v.job.id, now, started_at=now)
        v.job = dataclasses.replace(v.job, phase=jobs.Phase.RUNNING.value, start_time=now)
        v.s = dataclasses.replace(v.s, started_at=now)

    def _progress(self, conn: sa.Connection, v: View, now: int) -> int:
        """Record what live trials reported, and end those whose job ended; how many jobs
        were asked to stop (the search's stop)."""
        asked = 0
        for i, t in enumerate(v.stored):
            if State(t.state) not in trials.LIVE:
                continue
            report = v.reports.get(t.number, {})
            reward = report[max(report)] if report else None
            if report != search_repo.intermediate(t):
                search_repo.set_progress(conn, t, now, intermediate=report, reward=reward)
                t = v.stored[i] = dataclasses.replace(
                    t, intermediate=json.dumps({str(k): x for k, x in report.items()}),
                    reward=reward)
            job = v.job_of(t)
            if job is None:  # deleted and purged behind the search's back
                search_repo.move(conn, t, State.FAILED, now, reason="its job is gone",
                                 level="Warning",
                                 message=f"Trial {t.number} failed: its job is gone")
                v.stored[i] = dataclasses.replace(t, state=State.FAILED.value)
            elif t.number in v.final:
                v.stored[i] = _end_trial(conn, t, job, now)
                self.platform.rewards.forget({job.id})
            elif v.stopping and t.state == State.RUNNING:
                v.stored[i] = _ask_stop(conn, t, trials.StopCause.SEARCH,
                                        "stopped with its search", now)
                asked += 1
        return asked

    def _stop_losers(self, conn: sa.Connection, v: View, now: int) -> int:
        """Ask the pruner about each running trial that reported; stop those it gives up."""
        running = [i for i, t in enumerate(v.stored) if t.state == State.RUNNING
                   and search_repo.intermediate(t) and _runs(v.job_of(t))]
        if not running or v.search.algorithm.pruning == algorithms.Pruning.NONE:
            return 0
        from corral.kinds.search import study  # (see the module's doc)
        built = study.rebuild(v.search, v.stored)
        asked = 0
        for i in running:
            t = v.stored[i]
            prune, attrs = study.should_prune(built, t.number)
            if json.loads(t.system_attrs) != attrs:
                search_repo.set_attrs(conn, t, now, attrs)
            if prune:
                steps = search_repo.intermediate(t)
                last = max(steps)
                v.stored[i] = _ask_stop(conn, t, trials.StopCause.PRUNED,
                                        f"pruned by {v.search.algorithm.name}: reward "
                                        f"{steps[last]:g} at step {last} fell behind", now)
                asked += 1
        return asked

    def _submit(self, conn: sa.Connection, v: View, now: int) -> int:
        """New trials, up to the number allowed at once and in all; how many."""
        room = _room(v, now)
        if room <= 0:
            return 0
        from corral.kinds.search import study
        built = study.rebuild(v.search, v.stored)
        started = 0
        for _ in range(room):
            number = len(v.stored)
            params, attrs = study.ask(v.search, built)
            body = common.trial_body(v.job, number, params)
            made = owned.try_submit(conn, self.platform.services, common.owner(v.job),
                                    common.role(number), body, now)
            if isinstance(made, Exception):
                kind_repo.add_event_unless_last(
                    conn, common.KIND, v.job.id, now, level="Warning",
                    message=f"Trial {number} could not be submitted: {made.message}")
                v.refused = made.message
                break
            search_repo.add_trial(conn, v.job.id, number, made.id, params=params,
                                  system_attrs=attrs, now=now)
            v.stored.append(search_repo.trial(conn, v.job.id, number))
            v.trial_jobs[made.id] = made
            started += 1
        return started


def _room(v: View, now: int) -> int:
    """How many trials may start now."""
    if v.job.phase != jobs.Phase.RUNNING.value:
        return 0
    budget = v.search.time_budget_ms
    if budget and v.s.started_at is not None and now >= v.s.started_at + budget:
        return 0
    live = sum(1 for t in v.stored if State(t.state) in trials.LIVE)
    return min(v.search.parallel - live, v.search.trials - len(v.stored))


def _runs(job: rows.Job | None) -> bool:
    return job is not None and job.phase == jobs.Phase.RUNNING.value


def _ask_stop(conn: sa.Connection, t: kind_rows.SearchTrial, cause: trials.StopCause,
              why: str, now: int) -> kind_rows.SearchTrial:
    """Move a running trial to stopping for `cause`, and ask its job to stop."""
    if not search_repo.move(conn, t, State.STOPPING, now, stop_cause=cause.value,
                            reason=why, message=f"Trial {t.number} stopping: {why}"):
        return t
    job_repo.request_terminate(conn, t.job_id, now, f"Stopped by its search: {why}")
    return dataclasses.replace(t, state=State.STOPPING.value, stop_cause=cause.value,
                               reason=why)


def _end_trial(conn: sa.Connection, t: kind_rows.SearchTrial, job: rows.Job,
               now: int) -> kind_rows.SearchTrial:
    """End a trial whose job ended, as its job and what asked it to stop say."""
    to, why = _outcome(t, job)
    level = "Info" if to in (State.COMPLETED, State.PRUNED) else "Warning"
    reward = f", reward {t.reward:g}" if t.reward is not None else ""
    search_repo.move(conn, t, to, now, reason=why, level=level,
                     message=f"Trial {t.number} {to.value}{reward}" +
                             (f": {why}" if why and to != State.COMPLETED else ""))
    return dataclasses.replace(t, state=to.value, reason=why, ended_at=now)


def _outcome(t: kind_rows.SearchTrial, job: rows.Job) -> tuple[State, str | None]:
    if job.phase == jobs.Phase.COMPLETED.value:
        if t.reward is None:
            return State.FAILED, "its job completed without reporting the reward"
        return State.COMPLETED, None
    if t.stop_cause is not None:
        return trials.stop_state(trials.StopCause(t.stop_cause)), t.reason
    return State.FAILED, (f"its job ended {job.phase}"
                          + (f": {job.failure_message}" if job.failure_message else ""))

