"""The local executor: tasks run as processes on this machine.

`tasks.LocalExecutor` is what the server builds, for the node `machine.detect_node`
describes. Its tasks are started by `launcher`, a script run as a process of its own (it
imports nothing of corral); `claims`, `processes` and `watcher` are how it finds them again
and hears of their ends. This package exposes its modules, not names.
"""
