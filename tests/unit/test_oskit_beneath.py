"""Opening what a job can write without following what it planted (oskit/beneath.py)."""

from __future__ import annotations

import os
import pathlib
import re
import threading

import pytest

from corral.oskit import beneath

PARTS = ("a", "b", "f.txt")


@pytest.fixture
def tree(tmp_path: pathlib.Path) -> pathlib.Path:
    """<tmp>/base/a/b/f.txt, and beside base a look-alike, <tmp>/other/a/b/f.txt."""
    for top, text in (("base", "mine"), ("other", "NOT-MINE")):
        folder = tmp_path / top / "a" / "b"
        folder.mkdir(parents=True)
        (folder / "f.txt").write_text(text)
    return tmp_path


def read(path: pathlib.Path) -> str:
    fd = beneath.open_file(path)
    with os.fdopen(fd, "rb") as fh:
        return fh.read().decode()


def test_a_file_with_no_link_on_its_way_is_read(tree: pathlib.Path) -> None:
    assert read(tree / "base" / "a" / "b" / "f.txt") == "mine"
    assert beneath.read(str(tree / "base" / "a" / "b" / "f.txt"))[0] == "mine"


@pytest.mark.parametrize("depth", range(len(PARTS)))
def test_a_link_planted_at_any_component_is_refused(tree: pathlib.Path, depth: int) -> None:
    planted = tree / "base" / pathlib.Path(*PARTS[:depth + 1])
    twin = tree / "other" / pathlib.Path(*PARTS[:depth + 1])
    planted.rename(planted.with_name("was"))
    planted.symlink_to(twin)
    with pytest.raises(beneath.Refused, match=re.escape(str(planted))):  # as far as it went
        read(tree / "base" / "a" / "b" / "f.txt")
    if depth < len(PARTS) - 1:
        with pytest.raises(beneath.Refused):  # nor as a folder to list or make things in
            os.close(beneath.open_dir(tree / "base" / "a" / "b"))
        base = beneath.open_dir(tree / "base")
        try:
            with pytest.raises(beneath.Refused):  # nor below a folder already open
                os.close(beneath.open_dir("a/b", start=base))
        finally:
            os.close(base)


def test_a_folder_swapped_for_a_link_after_its_parent_was_opened_is_refused(
        tree: pathlib.Path) -> None:
    top = beneath.open_dir(tree / "base")
    try:
        (tree / "base" / "a").rename(tree / "base" / "was")
        (tree / "base" / "a").symlink_to(tree / "other" / "a")
        with pytest.raises(beneath.Refused):
            os.close(beneath.open_dir("a", start=top))
        with pytest.raises(beneath.Refused):
            os.close(beneath.open_dir("a", start=top, make=True))
    finally:
        os.close(top)


def test_a_file_with_a_second_name_is_refused(tree: pathlib.Path) -> None:
    """A hard link a job made to a file it could not read itself has two names."""
    target = tree / "other" / "a" / "b" / "f.txt"
    planted = tree / "base" / "a" / "b" / "g.txt"
    os.link(target, planted)
    with pytest.raises(beneath.Refused):
        read(planted)
    with pytest.raises(beneath.Refused):
        read(target)


def test_a_fifo_is_refused_without_waiting_for_a_writer(tree: pathlib.Path) -> None:
    fifo = tree / "base" / "a" / "b" / "worker-0.log"
    os.mkfifo(fifo)
    outcome: list[BaseException | str] = []

    def reading() -> None:
        try:
            outcome.append(read(fifo))
        except BaseException as exc:
            outcome.append(exc)

    reader = threading.Thread(target=reading, daemon=True)
    reader.start()
    reader.join(10)
    if reader.is_alive():  # let the thread end, then fail
        with open(fifo, "wb"):
            pass
        pytest.fail("opening a fifo waited for a writer")
    [got] = outcome
    assert isinstance(got, beneath.Refused)


def test_dot_dot_and_relative_paths_are_refused(tree: pathlib.Path) -> None:
    with pytest.raises(beneath.Refused):
        read(tree / "base" / "a" / ".." / "a" / "b" / "f.txt")
    with pytest.raises(ValueError):
        beneath.open_file("base/a/b/f.txt")
    base = beneath.open_dir(tree / "base")
    try:
        with pytest.raises(beneath.Refused):
            os.close(beneath.open_dir("a/../a", start=base))
        with pytest.raises(ValueError):
            beneath.open_at(base, "..")
    finally:
        os.close(base)


def test_a_folder_or_file_that_is_not_the_owners_is_refused(tree: pathlib.Path) -> None:
    folder = tree / "base" / "a" / "b"
    someone = os.geteuid() + 1
    with pytest.raises(beneath.Refused, match="not the server's"):
        beneath.open_dir(folder, owner=someone)
    with pytest.raises(beneath.Refused, match="not the server's"):
        beneath.read(str(folder / "f.txt"), owner=someone)
    assert beneath.read(str(folder / "f.txt"), owner=os.geteuid())[0] == "mine"


def test_a_file_is_made_beneath_folders_made_on_the_way(tree: pathlib.Path) -> None:
    path = tree / "base" / "new" / "deeper" / "task.log"
    fd = beneath.open_file(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, make=True,
                           owner=os.geteuid())
    beneath.write_all(fd, b"hello\n")
    os.close(fd)
    assert path.read_text() == "hello\n"


def test_folders_are_made_without_following_a_link_and_the_last_one_given(
        tree: pathlib.Path) -> None:
    made = tree / "base" / "a" / "b" / "out" / "run"
    beneath.make_dirs(made, (os.getuid(), os.getgid()))
    assert made.is_dir()
    (tree / "base" / "a" / "b").rename(tree / "base" / "a" / "was")
    (tree / "base" / "a" / "b").symlink_to(tree / "other" / "a" / "b")
    with pytest.raises(beneath.Refused):
        beneath.make_dirs(tree / "base" / "a" / "b" / "elsewhere")
    assert not (tree / "other" / "a" / "b" / "elsewhere").exists()


def test_a_file_replaced_is_never_written_through_the_link_at_its_name(
        tree: pathlib.Path) -> None:
    folder = tree / "base" / "a" / "b"
    (folder / "f.txt").unlink()
    (folder / "f.txt").symlink_to(tree / "other" / "a" / "b" / "f.txt")
    fd = beneath.open_dir(folder)
    try:
        beneath.replace(fd, "f.txt", lambda out: beneath.write_all(out, b"new"))
    finally:
        os.close(fd)
    assert (folder / "f.txt").read_bytes() == b"new" and not (folder / "f.txt").is_symlink()
    assert (tree / "other" / "a" / "b" / "f.txt").read_text() == "NOT-MINE"
    assert sorted(p.name for p in folder.iterdir()) == ["f.txt"]  # no leftovers


# --- removing a tree --------------------------------------------------------------------


def test_a_tree_is_removed_with_the_links_in_it_but_not_what_they_point_at(
        tmp_path: pathlib.Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious").write_text("keep")
    tree = tmp_path / "out" / "run" / "channel"
    (tree / "sub").mkdir(parents=True)
    (tree / "sub" / "model.bin").write_text("x")
    (tree / "to-dir").symlink_to(outside)
    (tree / "to-file").symlink_to(outside / "precious")

    assert beneath.remove_tree(tree) is True

    assert not tree.exists() and (outside / "precious").read_text() == "keep"
    assert beneath.remove_tree(tree) is False  # nothing left to remove


def test_a_link_on_the_way_is_refused_and_nothing_is_removed(tmp_path: pathlib.Path) -> None:
    real = tmp_path / "real"
    (real / "channel").mkdir(parents=True)
    (tmp_path / "via").symlink_to(real)

    with pytest.raises(beneath.Refused):
        beneath.remove_tree(tmp_path / "via" / "channel")

    assert (real / "channel").is_dir()


def test_a_link_in_the_place_of_the_folder_is_removed_itself(tmp_path: pathlib.Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "channel").symlink_to(outside)

    assert beneath.remove_tree(tmp_path / "channel") is True

    assert outside.is_dir() and not (tmp_path / "channel").is_symlink()


def test_what_another_writer_left_half_written_is_removed_and_nothing_else(
        tmp_path: pathlib.Path) -> None:
    folder, outside = tmp_path / "channel", tmp_path / "outside"
    (folder / "sub").mkdir(parents=True)
    outside.mkdir()
    (outside / ".x.tmp-1").write_text("not below the folder: only a link to it is")
    os.symlink(outside, folder / "sub" / "link")
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:  # what this process is writing is left alone
        beneath.replace(fd, "mine.bin", lambda out: (
            (folder / "sub" / ".other.bin.tmp-1").write_text("half"),
            (folder / ".top.csv.tmp-4194305").write_text("half"),
            beneath.drop_unfinished(folder)))
    finally:
        os.close(fd)
    for name in ("keep.tmp-12", ".tmp-3", ".notes.tmp-x", "data.csv"):
        (folder / name).write_text("a file of the job's")
    assert beneath.drop_unfinished(folder) == 0
    assert sorted(p.name for p in folder.rglob("*")) == [
        ".notes.tmp-x", ".tmp-3", "data.csv", "keep.tmp-12", "link", "mine.bin", "sub"]
    assert (outside / ".x.tmp-1").exists()
    assert beneath.drop_unfinished(tmp_path / "gone") == 0
