"""Whole files written, appended to and read where jobs can write too: never through a
link a job put in the way, never half written."""

from __future__ import annotations

import contextlib
import io
import os
import pathlib
from collections.abc import Iterator
from typing import IO

import pytest

from corral.oskit import beneath
from corral.storage import wholefiles


def test_a_file_is_replaced_whole_and_read_in_part(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "a" / "b" / "config.json"
    wholefiles.write(path, b"one\n")
    wholefiles.write(path, b"two two\n")
    assert path.read_bytes() == b"two two\n"
    assert wholefiles.read(path, offset=4, limit=3) == b"two"
    assert wholefiles.size_of(wholefiles.stamp(path)) == 8
    assert wholefiles.stamp(tmp_path / "missing") is None
    assert [p.name for p in path.parent.iterdir()] == ["config.json"]  # no leftovers


def test_an_append_starts_on_a_line_of_its_own(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "index.txt"
    path.write_bytes(b"a\nb")
    wholefiles.append(path, b"c\n")
    assert path.read_bytes() == b"a\nb\nc\n"


@pytest.mark.parametrize("how", ["symlink", "hardlink", "folder"])
def test_a_link_planted_in_the_way_is_refused(tmp_path: pathlib.Path, how: str) -> None:
    secret = tmp_path / "secret"
    secret.write_text("root only\n")
    work = tmp_path / "work"
    work.mkdir()
    target = work / "index.txt"
    if how == "symlink":
        target.symlink_to(secret)
    elif how == "hardlink":
        os.link(secret, target)
    else:
        (work / "sub").symlink_to(tmp_path)
        target = work / "sub" / "secret"
    with pytest.raises(beneath.Refused):
        wholefiles.append(target, b"x\n")
    with pytest.raises(beneath.Refused):
        wholefiles.read(target)
    if how == "folder":
        with pytest.raises(beneath.Refused):
            wholefiles.write(target, b"x")
    else:  # a file written anew replaces the name, never writes through it
        wholefiles.write(target, b"x")
        assert not target.is_symlink() and target.read_bytes() == b"x"
    assert secret.read_text() == "root only\n"


def test_a_folder_is_filled_beside_its_place_and_kept_once_there(
        tmp_path: pathlib.Path) -> None:
    files = {"model.json": b"{}", "weights/part-0": b"123"}

    @contextlib.contextmanager
    def source(rel: str) -> Iterator[IO[bytes]]:
        yield io.BytesIO(files[rel])

    dest = tmp_path / "deploy" / "models" / "m-v1"
    wholefiles.write_tree(dest, list(files), source)
    assert (dest / "weights" / "part-0").read_bytes() == b"123"
    files["model.json"] = b"changed"
    wholefiles.write_tree(dest, list(files), source)  # a model's files never change
    assert (dest / "model.json").read_bytes() == b"{}"
    assert sorted(p.name for p in dest.parent.iterdir()) == ["m-v1"]
