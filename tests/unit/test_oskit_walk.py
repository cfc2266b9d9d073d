"""Walking a folder a job can write without following what it planted (oskit/walk.py)."""

from __future__ import annotations

import os
import pathlib
from collections.abc import Iterator

import pytest

from corral.oskit import beneath, walk


@pytest.fixture
def out(tmp_path: pathlib.Path) -> pathlib.Path:
    """A folder with a file, a folder, and links a job put there; and beside it, files of
    someone else's."""
    (tmp_path / "theirs").mkdir()
    (tmp_path / "theirs" / "secret.txt").write_text("NOT-MINE")
    folder = tmp_path / "out"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.txt").write_text("a")
    (folder / "sub" / "b.txt").write_text("b")
    (folder / "stolen.txt").symlink_to(tmp_path / "theirs" / "secret.txt")
    (folder / "stolen-dir").symlink_to(tmp_path / "theirs")
    os.link(tmp_path / "theirs" / "secret.txt", folder / "second-name.txt")
    os.mkfifo(folder / "fifo")
    return folder


@pytest.fixture
def top(out: pathlib.Path) -> Iterator[int]:
    fd = beneath.open_dir(out)
    yield fd
    os.close(fd)


SOMEONE = walk.Reader(uid=os.geteuid() + 1, gids=frozenset())


def test_a_walk_says_why_each_entry_is_not_to_be_read(top: int) -> None:
    found = list(walk.walk(top))

    assert [e.rel for e in found] == ["a.txt", "fifo", "second-name.txt", "stolen-dir",
                                      "stolen.txt", "sub", "sub/b.txt"]
    assert {e.rel: e.why for e in found if e.why} == {
        "fifo": walk.ODD, "second-name.txt": walk.SECOND_NAME, "stolen-dir": walk.LINK,
        "stolen.txt": walk.LINK}
    assert [e.rel for e in walk.walk(top, leave=lambda name: name != "sub")] == [
        "sub", "sub/b.txt"]


def test_a_folder_swapped_for_a_link_while_it_is_walked_is_not_walked_through(
        out: pathlib.Path, top: int) -> None:
    found = walk.walk(top)
    assert next(found).rel == "a.txt"  # "sub" is listed, not yet opened
    (out / "sub").rename(out / "was-sub")
    (out / "sub").symlink_to(out.parent / "theirs")

    rest = {e.rel: e.why for e in found}

    assert rest["sub"] == walk.LINK
    assert not [rel for rel in rest if rel.startswith("sub/")]


def test_a_folder_made_a_link_after_the_walk_is_not_read_through(
        out: pathlib.Path, top: int) -> None:
    assert "sub/b.txt" in {e.rel for e in walk.walk(top)}
    (out / "sub").rename(out / "was-sub")
    (out / "sub").symlink_to(out.parent / "theirs")
    (out.parent / "theirs" / "b.txt").write_text("NOT-MINE")

    with pytest.raises(beneath.Refused):
        walk.open_below(top, "sub/b.txt")
    with pytest.raises(beneath.Refused):
        walk.open_below(top, "stolen.txt")
    with pytest.raises(ValueError):
        walk.open_below(top, "../theirs/secret.txt")
    with os.fdopen(walk.open_below(top, "a.txt"), "rb") as fh:
        assert fh.read() == b"a"


def test_a_reader_gets_only_what_its_modes_give_it(out: pathlib.Path, top: int) -> None:
    """Files and folders the server's user owns, read for another user (by their modes)."""
    (out / "a.txt").chmod(0o600)
    (out / "sub").chmod(0o700)
    try:
        found = {e.rel: e.why for e in walk.walk(top, SOMEONE)}
        assert found["a.txt"] == walk.FILE_DENIED
        assert found["sub"] == walk.FOLDER_DENIED and "sub/b.txt" not in found
        with pytest.raises(beneath.Refused, match="may not read"):
            walk.open_below(top, "a.txt", SOMEONE)
        with pytest.raises(beneath.Refused, match="may not read"):
            walk.open_below(top, "sub/b.txt", SOMEONE)
        (out / "sub").chmod(0o750)
        group = walk.Reader(uid=os.geteuid() + 1, gids=frozenset({os.getegid()}))
        os.close(walk.open_below(top, "sub/b.txt", group))
    finally:
        (out / "sub").chmod(0o755)
