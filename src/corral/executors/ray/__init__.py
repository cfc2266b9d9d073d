"""The Ray executor: tasks run on the nodes of a Ray cluster.

`bridge` is what the server builds: it runs the Ray driver (`cluster.RayExecutor`) in a
child process of its own, so that a cluster that stops answering cannot take the server
with it. Importing this package imports nothing of Ray; see the module docstrings.
"""
