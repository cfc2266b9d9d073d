"""Incremental learning: the rules of a loop that retrains, evaluates and promotes a model
as a dataset grows (KubeEdge Sedna's IncrementalLearningJob, on corral's own jobs).

Pure, no I/O: the spec a user writes, with Sedna's field names (`spec.py`); triggers and
the conditions on metrics that start a round or decide its verdict (`triggers.py`); how new
samples are split between training and evaluation (`samples.py`); the states of a loop,
its rounds and its deploys (`states.py`). The controller that acts on them is
`corral.kinds.incremental`.
"""
