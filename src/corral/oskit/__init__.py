"""The operating-system primitives corral's safety rests on, each written once: opening
what a job can write without following a link it planted (`beneath`), walking such a
folder (`walk`), and finding processes by what /proc says of them (`procs`).

The package sits below every layer: it imports nothing of corral and nothing outside the
standard library (import-linter's contracts say so). Its modules are also loaded as plain
files, by processes that cannot import corral's package tree: the local executor's
launcher and keepers and the child that does a job's file work as its user
(`python -I -S <file>`, with this folder put on `sys.path`), and the Ray nodes' agents
(shipped to the nodes by value). So a module imports a sibling as `corral.oskit.<name>`
when it is corral's, and as `<name>` when it is a plain file.
"""
