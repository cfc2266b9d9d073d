"""Job kinds: controllers of objects that run their work as ordinary training jobs.

An incremental-learning loop, a pipeline, a notebook: each is an object with its own
tables and states, and a controller (a `loop.Controller`) that moves it along. A
controller never starts a process. It submits training jobs that record it as their owner
(`owned.py`), which the scheduler queues, places, retries and watches like any other, and
it reacts to their ends. Its own state changes are guarded transitions with events
(`store/kind_repo.py`), so that a server killed at any moment and started again goes on
where it was: a controller re-reads its objects and their jobs on every pass.
"""
