"""Waiting on jobs (api/watch.py): a change told by any thread ends the wait of those
watching that job, and only theirs."""

from __future__ import annotations

import asyncio
import threading

from corral.api import watch


def test_a_change_told_from_another_thread_ends_the_wait_of_that_jobs_watchers() -> None:
    changes = watch.JobChanges()

    async def main() -> tuple[bool, bool, int]:
        loop = asyncio.get_running_loop()
        with changes.watching("a") as a, changes.watching("b") as b:
            assert changes.watched() == 2
            a.arm()
            b.arm()
            waits = [asyncio.ensure_future(w.wait(30)) for w in (a, b)]
            teller = threading.Thread(target=changes.changed, args=(["a", "c"],))
            await loop.run_in_executor(None, teller.start)
            done, _ = await asyncio.wait(waits, timeout=10,
                                         return_when=asyncio.FIRST_COMPLETED)
            a_done, b_done = waits[0] in done and waits[0].result(), waits[1].done()
            waits[1].cancel()
        return a_done, b_done, changes.watched()

    assert asyncio.run(main()) == (True, False, 0)


def test_a_change_between_arming_and_waiting_is_not_missed() -> None:
    changes = watch.JobChanges()

    async def main() -> bool:
        with changes.watching("a") as w:
            w.arm()
            changes.changed(["a"])  # while the job is being read
            await asyncio.sleep(0)  # the poke is delivered through the loop
            waiting = asyncio.ensure_future(w.wait(30))
            done, _ = await asyncio.wait([waiting], timeout=10)
            return waiting in done and waiting.result()

    assert asyncio.run(main())


def test_a_wait_ends_by_itself_to_read_the_job_again() -> None:
    changes = watch.JobChanges()

    async def main() -> bool:
        with changes.watching("a") as w:
            w.arm()
            changed = await asyncio.wait_for(w.wait(0.01), 10)  # nobody tells: it ends anyway
            return not changed

    assert asyncio.run(main())
    changes.changed(["a"])  # nobody watches any more: nothing to do


def test_a_change_that_leaves_the_job_in_a_phase_the_watch_waits_through_wakes_nobody() -> None:
    """The scheduler says which phase each job moved to: a watch waiting for the job to
    leave Pending and Running is not woken (to read the job) by its start, nor by a change
    that moved no phase; it is by its end, and by a change that says nothing of phases."""
    changes = watch.JobChanges()

    async def woken(tell: list[tuple[list[str], dict[str, str] | None]]) -> bool:
        with changes.watching("a", {"Pending", "Running"}) as w:
            w.arm()
            for ids, moved in tell:
                changes.changed(ids, moved)
            await asyncio.sleep(0)  # a poke is delivered through the loop
            return await asyncio.wait_for(w.wait(0.2), 10)

    assert not asyncio.run(woken([(["a"], {"a": "Running"}), (["a", "b"], {"b": "Failed"})]))
    assert asyncio.run(woken([(["a"], {"a": "Running"}), (["a"], {"a": "Completed"})]))
    assert asyncio.run(woken([(["a"], None)]))


def test_a_stream_of_a_jobs_changes_is_woken_by_every_change() -> None:
    """A watch that waits through no phase (the console's streams of a job's changes and
    of its log) is woken by a change that kept the job's phase, too."""
    changes = watch.JobChanges()

    async def woken() -> bool:
        with changes.watching("a") as w:
            w.arm()
            changes.changed(["a"], {})  # the job changed, its phase did not
            await asyncio.sleep(0)
            return await asyncio.wait_for(w.wait(5), 10)

    assert asyncio.run(woken())
