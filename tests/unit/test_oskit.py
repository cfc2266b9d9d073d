"""corral.oskit loads where corral's package tree cannot be imported: as plain files with
nothing but the standard library (the launcher, the keepers, the child that works as a
job's user), and shipped by value to a Ray node that has no corral."""

from __future__ import annotations

import pathlib
import subprocess
import sys
from unittest import mock

import pytest

from corral import oskit

OSKIT = pathlib.Path(oskit.__file__).parent
#: a Python that cannot import corral: it refuses the import (corral is on its path here)
NO_CORRAL = """
import sys
class NoCorral:
    def find_spec(self, name, path=None, target=None):
        if name == "corral" or name.startswith("corral."):
            raise ImportError("no corral here")
sys.meta_path.insert(0, NoCorral())
"""


def test_every_module_loads_as_a_plain_file_with_the_standard_library_alone() -> None:
    names = sorted(p.stem for p in OSKIT.glob("*.py") if p.stem != "__init__")
    load = (f"import sys; sys.path.insert(0, {str(OSKIT)!r}); import {', '.join(names)}; "
            "print(sorted(m for m in sys.modules if m.startswith('corral')))")
    said = subprocess.run([sys.executable, "-I", "-S", "-c", NO_CORRAL + load],
                          capture_output=True, text=True)
    assert (said.returncode, said.stdout.strip()) == (0, "[]"), said.stderr
    assert names == ["beneath", "procs", "walk"]


def test_the_node_agents_code_travels_by_value_with_the_primitives_it_uses() -> None:
    cloudpickle = pytest.importorskip("ray.cloudpickle")
    from corral.executors.ray import actor, agents

    agents.Agents(mock.MagicMock(), "ns")  # registers what travels by value
    shipped = cloudpickle.dumps((actor.NodeAgent, actor._kill_marked, actor._open_below))
    on_node = NO_CORRAL + """
import os, pickle
agent, kill_marked, open_below = pickle.loads(sys.stdin.buffer.read())
kill_marked("no-such-launch")  # scans /proc with oskit.procs, shipped along
os.close(open_below("/proc/self", "status"))  # opens with oskit.walk and beneath
print(agent.__name__)
"""
    said = subprocess.run([sys.executable, "-c", on_node], input=shipped, capture_output=True)
    assert (said.returncode, said.stdout.strip()) == (0, b"NodeAgent"), said.stderr[-2000:]
