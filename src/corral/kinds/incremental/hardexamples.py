"""Hard examples: samples the inference service found hard, added to the loop's dataset.

With deploySpec.hardExampleMining the service may append lines to HARD_EXAMPLES_FILE (one
sample a line, like the dataset's own). Each pass the complete lines written since the
last one are appended to the dataset, where they count as new data for the next round.
What has been taken is kept as a byte offset in the loop's row; a file found shorter
than that was started again, and is read from its beginning. A server killed between
appending to the dataset and recording the offset appends those lines again: a hard
example may count twice, never not at all.
"""

from __future__ import annotations

import logging

from corral.domain import errors
from corral.domain.incremental import loopspec, states
from corral.kinds.incremental import common, layout
from corral.services import datasets
from corral.store import dataset_repo, kind_rows, loop_repo

log = logging.getLogger(__name__)
#: the most read of the file in one pass
MAX_READ = 1024 * 1024


def ingest(ctx: common.Ctx, loop: kind_rows.Loop, spec: loopspec.LoopSpec, now: int) -> bool:
    """Add what the service wrote since the last pass to the dataset; True if it did."""
    if spec.deploySpec.hardExampleMining is None:
        return False
    with ctx.store.read() as conn:
        try:
            path = layout.Layout.of(conn, ctx.services, loop, spec).hard_examples
        except errors.CorralError:
            return False
    offset = loop.hard_examples_read
    files = layout.Files(ctx.stores, loop.project_id)
    try:
        found = files.stamp(path)
        size = int(found.split(":")[0]) if found else 0
        if size < offset:
            offset = 0  # the file was started again
        data = files.read(path, offset=offset, limit=MAX_READ) if found else b""
    except Exception as exc:  # (OSError, CorralError; botocore and aiohttp have their own)
        log.warning("loop %s: hard examples not read: %s", loop.name, exc)
        return False
    end = data.rfind(b"\n") + 1
    if end == 0 and len(data) < MAX_READ:
        return False  # no complete line yet
    taken = end or len(data)  # (a line longer than MAX_READ is skipped)
    lines = [line for line in data[:end].decode("utf-8", "replace").splitlines()
             if line.strip() and len(line) <= datasets.MAX_LINE]
    with ctx.store.read() as conn:
        seen = loop_repo.loop_by_id(conn, loop.id)
        if (seen is None or seen.hard_examples_read != loop.hard_examples_read
                or seen.state not in states.LIVE):
            return False
        dataset = dataset_repo.by_id(conn, seen.dataset_id)
        assert dataset is not None
    # The file is written outside the loop's transaction (services.datasets.append says
    # why), the offset recorded after it.
    total = (datasets.append(ctx.store, dataset.id, lines, ctx.stores,
                             common.confine_alone(ctx, seen), now) if lines else 0)
    with ctx.store.begin() as conn:
        locked = loop_repo.loop_by_id(conn, loop.id, lock=True)
        if locked is None or locked.hard_examples_read != loop.hard_examples_read:
            return False
        if lines:
            loop_repo.add_event(conn, locked.id, now, f"{len(lines)} hard example(s) from "
                                f"the service added to dataset {dataset.name} ({total} "
                                "samples)")
        loop_repo.update_loop(conn, locked.id, now, hard_examples_read=offset + taken)
    return True
