"""Removing output folders never goes through a link (nofollow.remove_tree, which clean
and delete use)."""

from __future__ import annotations

import pathlib

import pytest

from corral.storage import nofollow


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

    assert nofollow.remove_tree(tree) is True

    assert not tree.exists() and (outside / "precious").read_text() == "keep"
    assert nofollow.remove_tree(tree) is False  # nothing left to remove


def test_a_link_on_the_way_is_refused_and_nothing_is_removed(tmp_path: pathlib.Path) -> None:
    real = tmp_path / "real"
    (real / "channel").mkdir(parents=True)
    (tmp_path / "via").symlink_to(real)

    with pytest.raises(nofollow.Refused):
        nofollow.remove_tree(tmp_path / "via" / "channel")

    assert (real / "channel").is_dir()


def test_a_link_in_the_place_of_the_folder_is_removed_itself(tmp_path: pathlib.Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "channel").symlink_to(outside)

    assert nofollow.remove_tree(tmp_path / "channel") is True

    assert outside.is_dir() and not (tmp_path / "channel").is_symlink()
