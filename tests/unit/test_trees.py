"""Folders a job can write, listed, read and written by the server without following what
the job planted in them: what a listing says was left out (storage/trees.py, on oskit.walk),
and objects.Location built on it."""

from __future__ import annotations

import io
import os
import pathlib

import pytest

from corral.oskit import beneath, walk
from corral.storage import objects, trees


@pytest.fixture
def out(tmp_path: pathlib.Path) -> pathlib.Path:
    """An output folder with a file, a folder, and links a job put there; and beside it,
    files of someone else's."""
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


def test_a_listing_leaves_links_and_odd_files_out_and_says_so(out: pathlib.Path) -> None:
    tree = trees.list_tree(str(out))

    assert sorted(tree.files) == ["a.txt", "sub/b.txt"]
    assert tree.skipped == {"fifo": "not a regular file",
                            "second-name.txt": "a file with a second name (a hard link)",
                            "stolen-dir": "a link", "stolen.txt": "a link"}


def test_a_reader_is_told_which_files_and_folders_it_may_not_read(out: pathlib.Path) -> None:
    """Files and folders the server's user owns, read for another user (by their modes)."""
    (out / "a.txt").chmod(0o600)
    (out / "sub").chmod(0o700)
    someone = walk.Reader(uid=os.geteuid() + 1, gids=frozenset())

    tree = trees.list_tree(str(out), someone)

    assert "a.txt" not in tree.files and "sub/b.txt" not in tree.files
    assert tree.skipped["a.txt"] == "a file the job's user may not read"
    assert tree.skipped["sub/"] == "a folder the job's user may not read"
    with pytest.raises(beneath.Refused):
        trees.open_file(str(out), "a.txt", someone)
    (out / "sub").chmod(0o755)


def test_a_whole_folder_the_reader_may_not_list_is_refused(out: pathlib.Path) -> None:
    out.chmod(0o700)
    with pytest.raises(beneath.Refused):
        trees.list_tree(str(out), walk.Reader(uid=os.geteuid() + 1, gids=frozenset()))


def test_a_copy_between_local_folders_follows_no_link(out: pathlib.Path,
                                                      tmp_path: pathlib.Path) -> None:
    src = objects.local(out)
    files, _size = objects.copy_tree(src, objects.local(tmp_path / "copy"))

    assert files == 2
    copied = sorted(p.relative_to(tmp_path / "copy").as_posix()
                    for p in (tmp_path / "copy").rglob("*") if p.is_file())
    assert copied == ["a.txt", "sub/b.txt"]
    assert "stolen.txt" in src.skipped


def test_nothing_is_written_through_a_link_in_the_destination(tmp_path: pathlib.Path) -> None:
    dest = tmp_path / "dest"
    dest.mkdir()
    (tmp_path / "elsewhere").mkdir()
    (dest / "sub").symlink_to(tmp_path / "elsewhere")
    (dest / "file.txt").symlink_to(tmp_path / "elsewhere" / "file.txt")
    target = objects.local(dest)

    with pytest.raises(beneath.Refused):
        target.write("sub/x.txt", io.BytesIO(b"x"))
    target.write("file.txt", io.BytesIO(b"new"))  # the link is replaced, not written through

    assert list((tmp_path / "elsewhere").iterdir()) == []
    assert (dest / "file.txt").read_bytes() == b"new" and not (dest / "file.txt").is_symlink()


def test_a_key_that_climbs_out_of_the_destination_is_refused(tmp_path: pathlib.Path) -> None:
    """Object keys may hold '..': fetched into a local folder, none leads out of it."""
    with pytest.raises(beneath.Refused):
        objects.local(tmp_path / "dest").write("../escaped.txt", io.BytesIO(b"x"))
    assert not (tmp_path / "escaped.txt").exists()


def test_an_upload_reads_only_what_the_listing_took(out: pathlib.Path,
                                                    tmp_path: pathlib.Path) -> None:
    seen: objects.Seen = {}
    src = objects.local(out)

    assert objects.upload_changed(src, objects.local(tmp_path / "up"), seen) == 2
    assert sorted(seen) == ["a.txt", "sub/b.txt"]
    assert not (tmp_path / "up" / "stolen.txt").exists()
