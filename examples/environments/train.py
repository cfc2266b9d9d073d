"""Reads its settings from settings.toml with tomli, a package the job asked for
(job.yaml: algorithm.engine.requirements), and says where tomli and its Python came from."""

from __future__ import annotations

import pathlib
import sys

import tomli

here = pathlib.Path(__file__).resolve().parent
settings = tomli.loads((here / "settings.toml").read_text())
print(f"tomli {tomli.__name__} from {pathlib.Path(tomli.__file__).parent}")
print(f"python {sys.executable}")
print(f"settings: {settings}")
print(f"corral:metrics step=1 greeting_length={len(settings['greeting'])}")
