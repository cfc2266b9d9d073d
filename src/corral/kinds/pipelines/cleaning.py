"""Removing a pipeline's intermediate outputs (`clean`, and when it is deleted).

The output folders of its runs are removed, except the channel saved as its model, what
another pipeline's cached run still uses, and what lies in object storage. Only folders
its own jobs wrote are touched, only under the project's storage roots, and never through
a link (`beneath.remove_tree`): a job may have put one where its output folder was. What
was removed and what was kept, and why, is said.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pathlib
from collections.abc import Iterable, Sequence

from corral.domain import errors
from corral.domain.pipelines import shape
from corral.kinds.pipelines import common
from corral.oskit import beneath
from corral.storage import objects, paths
from corral.store import kind_rows, pipeline_repo


@dataclasses.dataclass(frozen=True)
class Plan:
    """What a cleanup removes and keeps, and the runs whose outputs it takes away."""

    remove: list[str]
    kept: list[tuple[str, str]]  #: (folder, why)
    runs: list[tuple[int, str]]  #: (attempt, key) of the runs that lose outputs


@dataclasses.dataclass(frozen=True)
class Done:
    removed: list[str]
    kept: list[tuple[str, str]]

    def summary(self) -> str:
        text = f"{len(self.removed)} output folder(s) removed"
        if self.removed:
            text += ": " + ", ".join(self.removed)
        if self.kept:
            text += "; kept: " + ", ".join(f"{path} ({why})" for path, why in self.kept)
        return text


def plan(p: kind_rows.Pipeline, checked: shape.Shape, runs: Sequence[kind_rows.PipelineRun],
         borrowers: Iterable[kind_rows.PipelineRun]) -> Plan:
    """What cleaning `p` (all of its attempts' `runs`) removes and keeps."""
    saved = _saved_model(p, checked, runs)
    borrowed = {b.source for b in borrowers}
    remove: list[str] = []
    kept: dict[str, str] = {}
    for run in runs:
        if run.origin != "run" or run.job_id is None:
            continue  # its outputs are another run's (of this pipeline, or of another)
        for channel, url in (pipeline_repo.loads(run.outputs) or {}).items():
            if (common.source(run), channel) == saved:
                kept[url] = "the saved model"
            elif common.source(run) in borrowed:
                kept[url] = "a cached run of another pipeline uses it"
            elif objects.is_remote(url):
                kept[url] = "in object storage"
            elif url not in remove:
                remove.append(url)
    gone = set(remove)
    losing = [(r.attempt, r.key) for r in runs if r.origin != "cached"
              and gone & set((pipeline_repo.loads(r.outputs) or {}).values())]
    return Plan(remove=remove, kept=sorted(kept.items()), runs=losing)


def _saved_model(p: kind_rows.Pipeline, checked: shape.Shape,
                 runs: Sequence[kind_rows.PipelineRun]) -> tuple[str, str] | None:
    model = checked.body.model
    if model is None or p.model_version is None:
        return None
    current = [r for r in runs if r.attempt == p.attempt and r.key == model.task]
    return (common.source(current[0]), model.channel) if current else None


def remove(policy: paths.Policy, todo: Plan) -> Done:
    """Remove what `todo` says, under the storage roots only, never through a link."""
    removed: list[str] = []
    kept = list(todo.kept)
    for url in todo.remove:
        path = pathlib.Path(os.path.normpath(url.removeprefix("file://")))
        try:
            real = paths.confine(policy, path, "output")
            if real != path:
                raise beneath.Refused(f"'{path}' leads elsewhere through a link")
            if beneath.remove_tree(path):
                removed.append(str(path))
                _prune(path.parent, levels=2)
        except (errors.BadParameter, OSError, ValueError) as exc:
            kept.append((str(path), f"not removed: {exc}"))
    return Done(removed=removed, kept=kept)


def _prune(folder: pathlib.Path, levels: int) -> None:
    """Remove `folder` and then its parents (up to `levels` of them) while they are empty:
    the run's folder and its task's, once their channels are gone."""
    for _ in range(levels + 1):
        with contextlib.suppress(OSError):  # not empty, or gone, or a link: left alone
            if folder.is_symlink():
                return
            folder.rmdir()
            folder = folder.parent
            continue
        return
