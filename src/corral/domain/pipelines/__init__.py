"""Pipelines: DAGs of training jobs, as pure rules (no I/O).

A pipeline is a set of tasks with dependencies; each task is an ordinary training job's
template, run once (or once per item of its `for_each`) in each attempt of the pipeline.
The modules, one concern each:

- `spec`: what a user writes (`PipelineCreate`), as pydantic models;
- `dag`: the graph's checks (a cycle or a missing name, with its path) and orders;
- `shape`: a pipeline checked, with every reference of every task (`check`);
- `expr`, `parser`: the small language of `when` conditions: its tree and evaluation, its
  parser (no `eval`);
- `status`: task states, the pipeline's status and progress, the trigger rules;
- `plan`: one pass of an attempt decided (which runs end, start, wait);
- `build`: a run's training job, with its references resolved (`parse` checks a body).
"""
