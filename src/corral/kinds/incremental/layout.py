"""Where a loop's files go under its outputDir.

    <outputDir>/rounds/<N>/train.txt      the round's training samples (TRAIN_DATASET_URL)
    <outputDir>/rounds/<N>/eval.txt       its frozen evaluation set (TEST_DATASET_URL)
    <outputDir>/rounds/<N>/model/         where its train job writes the new model (MODEL_URL)
    <outputDir>/deploy/model_config.json  what the service is to load (hot update)
    <outputDir>/deploy/models/<m>-v<N>/   the models written for the service
    <outputDir>/deploy/service/           the service's own output channel (service_url):
        model_ack.json                    what it says it loaded
        hard_examples.txt                 samples it found hard (it appends to it)
        hard_examples/                    a folder for their files (HE_SAVED_URL)

The server writes the first ones; the service writes only in its own output channel,
which corral makes for it (as the user jobs run as) like any job's.

outputDir is stored resolved; each time it is used it must still be allowed to the
project (`runtime.Runtime.confine`) and still lead to itself, and the files under it are
written and read without following links.
"""

from __future__ import annotations

import dataclasses
import functools
import pathlib

import sqlalchemy as sa

from corral.domain.incremental import loopspec
from corral.services import datasets, runtime
from corral.store import kind_rows


@dataclasses.dataclass(frozen=True)
class Layout:
    root: pathlib.Path

    @classmethod
    def of(cls, conn: sa.Connection, services: runtime.Runtime, loop: kind_rows.Loop,
           spec: loopspec.LoopSpec) -> Layout:
        confine = functools.partial(services.confine, conn, loop.project_id)
        return cls(datasets.unmoved(confine, spec.outputDir, "outputDir"))

    def round_dir(self, number: int) -> pathlib.Path:
        return self.root / "rounds" / str(number)

    def train_index(self, number: int, fmt: str) -> pathlib.Path:
        return self.round_dir(number) / f"train.{fmt}"

    def eval_index(self, number: int, fmt: str) -> pathlib.Path:
        return self.round_dir(number) / f"eval.{fmt}"

    def model_dir(self, number: int) -> pathlib.Path:
        return self.round_dir(number) / "model"

    @property
    def deploy_dir(self) -> pathlib.Path:
        return self.root / "deploy"

    @property
    def config(self) -> pathlib.Path:
        return self.deploy_dir / "model_config.json"

    @property
    def service_dir(self) -> pathlib.Path:
        return self.deploy_dir / "service"

    @property
    def ack(self) -> pathlib.Path:
        return self.service_dir / "model_ack.json"

    def deployed(self, model: str, version: int) -> pathlib.Path:
        return self.deploy_dir / "models" / f"{model}-v{version}"

    @property
    def hard_examples(self) -> pathlib.Path:
        return self.service_dir / "hard_examples.txt"

    @property
    def hard_examples_dir(self) -> pathlib.Path:
        return self.service_dir / "hard_examples"
