"""Inputs in object storage that a job follows (`follow: true`): their local copy kept up
to date while the job runs.

A followed input is fetched before the job is queued like any input in object storage,
then looked at again every `following.PERIOD` while the job runs: what was added or
changed since is copied into the job's copy, in the order and with the rewriting that
`domain.following` describes (a small file naming the input's URL names the copy's folder
instead). Files are never removed from the copy. What the copy held before a look of this
server's (a restart) counts as seen when it is as big as the object and newer than it.
"""

from __future__ import annotations

import dataclasses
import io
import os
import pathlib

from corral import settings as settings_mod
from corral.domain import following, specs
from corral.services import jobpaths
from corral.storage import objects, runs
from corral.store import rows


@dataclasses.dataclass
class Follow:
    """One followed input in object storage of one running job."""

    job_id: str
    project_id: str
    channel: str
    url: str
    local_dir: pathlib.Path
    own: tuple[str, ...]  #: its folders that are the job's own outputs (not followed)
    seen: dict[str, str] = dataclasses.field(default_factory=dict)
    last: float = 0.0

    def due(self, now: float) -> bool:
        return now - self.last >= following.PERIOD


def follows_of(job: rows.Job, spec: specs.JobCreate) -> list[Follow]:
    outputs = [o.url for o in spec.algorithm.outputs]
    return [Follow(job_id=job.id, project_id=job.project_id, channel=ch.name, url=ch.url,
                   local_dir=pathlib.Path(ch.local_dir),
                   own=following.own_outputs(ch.url, outputs))
            for ch in spec.algorithm.inputs
            if ch.follow and objects.is_remote(ch.url) and ch.local_dir]


def refresh(stores: objects.Stores, settings: settings_mod.Settings, f: Follow) -> int:
    """Copy what changed in the input since the last look; returns how many files."""
    src = stores.open(f.url, f.project_id)
    dest = jobpaths.own(runs.RunPaths(settings.runs_dir, f.job_id), str(f.local_dir))
    return copy_changed(src, objects.local(dest), (f.url, str(f.local_dir)), f.own, f.seen)


def copy_changed(src: objects.Location, dst: objects.Location, names: tuple[str, str],
                 own: tuple[str, ...], seen: dict[str, str]) -> int:
    """Copy the files of `src` that changed since `seen` (updated) into the folder `dst`;
    `names`: (the input's URL, its copy's folder as the job is told it), the first turned
    into the second in small files."""
    stamps = {rel: st for rel, st in src.stamps().items() if not following.skipped(rel, own)}
    if not seen:
        seen.update(_held(dst, stamps))
    changed = [(rel, when) for rel, (_size, mark, when) in stamps.items()
               if seen.get(rel) != mark]
    for rel in following.order(changed):
        size, mark, _when = stamps[rel]
        with src.open_read(rel) as fh:
            if size <= following.REWRITE_MAX:
                dst.write(rel, io.BytesIO(following.rewrite(fh.read(), *names)))
            else:
                dst.write(rel, fh)
        seen[rel] = mark
    return len(changed)


def _held(dst: objects.Location, stamps: dict[str, tuple[int, str, float]]) -> dict[str, str]:
    """What the copy already holds of `stamps`: files as big as the object and written
    after it changed (a small file rewritten may differ in size: it is copied again)."""
    if not os.path.isdir(dst.path):
        return {}
    have = dst.listing()
    return {rel: mark for rel, (size, mark, when) in stamps.items()
            if rel in have and have[rel][0] == size and have[rel][1] / 1e9 >= when}
