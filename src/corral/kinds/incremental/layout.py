"""Where a loop's files go under its outputDir, and how the server reads and writes them.

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
which corral makes for it (as the user jobs run as) like any job's. The service follows
`deploy/` as an input channel (`follow`), so that it sees each model deployed wherever it
runs.

outputDir is a local folder or an `s3://` URL in the project's object store. A local one is
stored resolved; each time it is used it must still be allowed to the project
(`runtime.Runtime.confine`) and still lead to itself, and the files under it are written
and read without following links. In object storage the jobs' channels are fetched and
uploaded by the server as any job's are.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import io
from collections.abc import Iterator
from typing import IO

import sqlalchemy as sa

from corral.domain import errors
from corral.domain.incremental import loopspec
from corral.services import datasets, runtime
from corral.storage import objects, wholefiles
from corral.store import kind_rows


@dataclasses.dataclass(frozen=True)
class Layout:
    root: str  #: outputDir: a real local path, or an s3:// URL

    @classmethod
    def of(cls, conn: sa.Connection, services: runtime.Runtime, loop: kind_rows.Loop,
           spec: loopspec.LoopSpec) -> Layout:
        if objects.is_remote(spec.outputDir):
            return cls(spec.outputDir.rstrip("/"))
        confine = functools.partial(services.confine, conn, loop.project_id)
        return cls(str(datasets.unmoved(confine, spec.outputDir, "outputDir")))

    @property
    def remote(self) -> bool:
        return objects.is_remote(self.root)

    def _at(self, *parts: str) -> str:
        return objects.join(self.root, *parts)

    def round_dir(self, number: int) -> str:
        return self._at("rounds", str(number))

    def train_index(self, number: int, fmt: str) -> str:
        return self._at("rounds", str(number), f"train.{fmt}")

    def eval_index(self, number: int, fmt: str) -> str:
        return self._at("rounds", str(number), f"eval.{fmt}")

    def model_dir(self, number: int) -> str:
        return self._at("rounds", str(number), "model")

    @property
    def deploy_dir(self) -> str:
        return self._at("deploy")

    @property
    def config(self) -> str:
        return self._at("deploy", "model_config.json")

    @property
    def service_dir(self) -> str:
        return self._at("deploy", "service")

    @property
    def ack(self) -> str:
        return self._at("deploy", "service", "model_ack.json")

    def deployed(self, model: str, version: int) -> str:
        return self._at("deploy", "models", f"{model}-v{version}")

    @property
    def hard_examples(self) -> str:
        return self._at("deploy", "service", "hard_examples.txt")

    @property
    def hard_examples_dir(self) -> str:
        return self._at("deploy", "service", "hard_examples")


@dataclasses.dataclass(frozen=True)
class Files:
    """A loop's files read and written where its outputDir is: locally without following
    links (`wholefiles`), in object storage through the project's store."""

    stores: objects.Stores | None
    project_id: str

    def _open(self, url: str) -> objects.Location:
        if self.stores is None:
            raise errors.CorralError("object storage cannot be reached here")
        return self.stores.open(url, self.project_id)

    def write(self, path: str, data: bytes) -> None:
        if not objects.is_remote(path):
            wholefiles.write(path, data)
            return
        parent, name = path.rsplit("/", 1)
        self._open(parent).write(name, io.BytesIO(data))

    def read(self, path: str, offset: int = 0, limit: int | None = None) -> bytes:
        if not objects.is_remote(path):
            return wholefiles.read(path, offset, limit)
        with self._open(path).open_read("") as fh:
            fh.seek(offset)
            return bytes(fh.read(-1 if limit is None else limit))

    def stamp(self, path: str) -> str | None:
        """Its size and a mark that changes when it does (None: no file)."""
        if not objects.is_remote(path):
            return wholefiles.stamp(path)
        loc = self._open(path)
        loc.fs.invalidate_cache()
        try:
            info = loc.fs.info(loc.path)
        except FileNotFoundError:
            return None
        return f"{int(info.get('size') or 0)}:{info.get('ETag') or info.get('LastModified')}"

    def put_tree(self, dest: str, src: objects.Location) -> None:
        """The files of `src` in folder `dest`, whole: locally filled beside it and renamed
        (a folder already there is left as it is); in object storage each file missing
        there, or of another size, is copied, so that a copy cut short is completed."""
        files = src.files()
        if not objects.is_remote(dest):
            @contextlib.contextmanager
            def source(rel: str) -> Iterator[IO[bytes]]:
                with src.fs.open(src.child(rel), "rb") as fh:
                    yield fh

            wholefiles.write_tree(dest, list(files), source)
            return
        there = self._open(dest)
        try:
            have = there.files()
        except FileNotFoundError:
            have = {}
        for rel, size in files.items():
            if have.get(rel) != size:
                with src.fs.open(src.child(rel), "rb") as fh:
                    there.write(rel, fh)
