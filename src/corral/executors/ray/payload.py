"""A launch in its node's terms: what the node's agent is asked to start.

The server's paths mean nothing on another machine. Those a task is given (its code, its
output channels, the inputs shipped to its node, its attempt's own folder) become
placeholders that the agent fills with where it put them on the node (`actor`), and the
server's own Python becomes the node's.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from corral.domain import distributed, metrics
from corral.executors import base
from corral.executors.ray import actor, inputs


def of(spec: base.LaunchSpec, hosts: Sequence[str], here: str,
       shipped: inputs.Inputs | None = None) -> dict[str, Any]:
    """The launch's payload; `hosts`: the address of each rank's node (rank 0's is
    MASTER_ADDR), `here`: this task's node's; `shipped`: the inputs shipped to its node,
    if any."""
    portable = _placeholders(spec, shipped)
    argv = [portable(a) for a in spec.argv]
    if not spec.shell and argv and argv[0] == sys.executable:
        argv[0] = actor.NODE_PYTHON  # the server's own Python: the node's instead
    env = {**spec.env, **distributed.address_env(hosts, here)}
    return {"launch_id": spec.launch_id, "task": spec.task, "argv": argv, "shell": spec.shell,
            "cwd": portable(spec.cwd), "env": {k: portable(v) for k, v in env.items()},
            "outputs": [actor.OUTPUT % i for i in range(len(spec.output_dirs))],
            "metrics": portable(env.get(metrics.FILE_ENV, "")),
            "inputs": {"key": shipped.key, "count": len(shipped.sources),
                       "seeds": shipped.seed_pairs()} if shipped else None}


def _placeholders(spec: base.LaunchSpec,
                  shipped: inputs.Inputs | None) -> Callable[[str], str]:
    """What turns a value naming a server path into one naming its placeholder."""
    attempt_dir = os.path.dirname(spec.control_dir)
    places = [(out, actor.OUTPUT % i) for i, out in enumerate(spec.output_dirs)]
    places += shipped.places() if shipped else []
    places.sort(key=lambda p: -len(p[0]))

    def portable(value: str) -> str:
        if ";" in value:  # a list of paths (MODEL_URLS): each part on its own
            return ";".join(one(part) for part in value.split(";"))
        return one(value)

    def one(value: str) -> str:
        for path, there in places:
            bare = path.rstrip("/") or path
            if value == path:
                return there
            if value == bare or value.startswith(bare + "/"):
                return there + value[len(bare):]
            if value.endswith("=" + path):  # --channel=<dir>, as channels are passed
                return value[:-len(path)] + there
        if spec.code_dir and (value == spec.code_dir or value.startswith(spec.code_dir + "/")):
            return actor.CODE + value[len(spec.code_dir):]
        if value == attempt_dir or value.startswith(attempt_dir + "/"):
            return actor.ROOT + value[len(attempt_dir):]
        return value

    return portable
