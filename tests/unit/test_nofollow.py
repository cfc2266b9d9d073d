"""Opening what a job can write without following what it planted (storage/nofollow.py),
and the run-directory reads and copies built on it."""

from __future__ import annotations

import os
import pathlib
import threading

import pytest

from corral.domain import errors
from corral.storage import nofollow, runs

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
    fd = nofollow.open_file(path)
    with os.fdopen(fd, "rb") as fh:
        return fh.read().decode()


def test_a_file_with_no_link_on_its_way_is_read(tree: pathlib.Path) -> None:
    assert read(tree / "base" / "a" / "b" / "f.txt") == "mine"


@pytest.mark.parametrize("depth", range(len(PARTS)))
def test_a_link_planted_at_any_component_is_refused(tree: pathlib.Path, depth: int) -> None:
    planted = tree / "base" / pathlib.Path(*PARTS[:depth + 1])
    twin = tree / "other" / pathlib.Path(*PARTS[:depth + 1])
    planted.rename(planted.with_name("was"))
    planted.symlink_to(twin)
    with pytest.raises(nofollow.Refused):
        read(tree / "base" / "a" / "b" / "f.txt")
    if depth < len(PARTS) - 1:
        with pytest.raises(nofollow.Refused):  # nor as a folder to list or make things in
            os.close(nofollow.open_dir(tree / "base" / "a" / "b"))
    assert runs.tail(tree / "base" / "a" / "b" / "f.txt", 100) == (b"", 0)
    assert runs.read_from(tree / "base" / "a" / "b" / "f.txt", 0, 100) == (b"", 0, 0)


def test_a_file_with_a_second_name_is_refused(tree: pathlib.Path) -> None:
    """A hard link a job made to a file it could not read itself has two names."""
    target = tree / "other" / "a" / "b" / "f.txt"
    planted = tree / "base" / "a" / "b" / "g.txt"
    os.link(target, planted)
    with pytest.raises(nofollow.Refused):
        read(planted)
    with pytest.raises(nofollow.Refused):
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
    assert isinstance(got, nofollow.Refused)
    assert runs.tail(fifo, 100) == (b"", 0)


def test_dot_dot_and_relative_paths_are_refused(tree: pathlib.Path) -> None:
    with pytest.raises(nofollow.Refused):
        read(tree / "base" / "a" / ".." / "a" / "b" / "f.txt")
    with pytest.raises(ValueError):
        nofollow.open_file("base/a/b/f.txt")


def test_folders_are_made_without_following_a_link_and_the_last_one_given(
        tree: pathlib.Path) -> None:
    made = tree / "base" / "a" / "b" / "out" / "run"
    nofollow.make_dirs(made, (os.getuid(), os.getgid()))
    assert made.is_dir()
    (tree / "base" / "a" / "b").rename(tree / "base" / "a" / "was")
    (tree / "base" / "a" / "b").symlink_to(tree / "other" / "a" / "b")
    with pytest.raises(nofollow.Refused):
        nofollow.make_dirs(tree / "base" / "a" / "b" / "elsewhere")
    assert not (tree / "other" / "a" / "b" / "elsewhere").exists()


@pytest.mark.parametrize("planted", ["logs", "metrics", "ctl"])
def test_an_attempts_folders_are_made_beneath_it_but_not_through_a_planted_link(
        tmp_path: pathlib.Path, planted: str) -> None:
    paths = runs.RunPaths(tmp_path / "runs", "job-1")
    me = (os.getuid(), os.getgid())
    paths.make_attempt_dirs(1, me)
    att = paths.attempt_dir(1)
    assert sorted(p.name for p in att.iterdir()) == ["ctl", "logs", "metrics"]
    assert (att.stat().st_uid, (att / "metrics").stat().st_uid) == (me[0], me[0])
    (tmp_path / "elsewhere").mkdir()
    (att / planted).rmdir()
    (att / planted).symlink_to(tmp_path / "elsewhere")
    with pytest.raises(nofollow.Refused, match=planted):
        paths.make_attempt_dirs(1, me)
    assert (att / planted).is_symlink()


def test_a_manifest_or_a_log_made_a_link_is_not_read(tmp_path: pathlib.Path) -> None:
    paths = runs.RunPaths(tmp_path / "runs", "job-1")
    paths.make_attempt_dirs(1)
    secret = tmp_path / "secret.json"
    secret.write_text('{"code_hash": "SECRET", "git_commit": "SECRET"}')
    (paths.attempt_dir(1) / runs.CODE_MANIFEST).symlink_to(secret)
    paths.log_path(1, "worker-0").symlink_to(secret)
    assert runs.read_code_manifest(paths.attempt_dir(1)) is None
    assert runs.tail(paths.log_path(1, "worker-0"), 1000) == (b"", 0)


def test_run_paths_are_real_so_that_only_a_planted_link_is_refused(
        tmp_path: pathlib.Path) -> None:
    (tmp_path / "disk").mkdir()
    (tmp_path / "runs").symlink_to(tmp_path / "disk")  # the administrator's link
    paths = runs.RunPaths(tmp_path / "runs", "job-1")
    paths.make_attempt_dirs(1)
    paths.log_path(1, "worker-0").write_text("hello\n")
    assert runs.tail(paths.log_path(1, "worker-0"), 100) == (b"hello\n", 6)


# --- the code snapshot ------------------------------------------------------------------


def code(tmp_path: pathlib.Path) -> pathlib.Path:
    src = tmp_path / "code"
    (src / "pkg").mkdir(parents=True)
    (src / "train.py").write_text("print('hi')\n")
    (src / "pkg" / "tool").write_text("#!/bin/sh\n")
    (src / "pkg" / "tool").chmod(0o4755)
    (src / "secret-link").symlink_to(tmp_path / "secret.txt")
    (tmp_path / "secret.txt").write_text("SECRET")
    (src / "__pycache__").mkdir()
    return src


def test_a_snapshot_copies_links_as_links_and_drops_set_id_bits(
        tmp_path: pathlib.Path) -> None:
    src = code(tmp_path)
    paths = runs.RunPaths(tmp_path / "runs", "job-1")
    paths.make_attempt_dirs(1)
    runs.snapshot(src, paths.code_dir(1))
    snap = paths.code_dir(1)
    assert (snap / "train.py").read_text() == "print('hi')\n"
    assert os.readlink(snap / "secret-link") == str(tmp_path / "secret.txt")
    assert (snap / "pkg" / "tool").stat().st_mode & 0o7777 == 0o755
    assert not (snap / "__pycache__").exists()
    manifest = runs.read_code_manifest(paths.attempt_dir(1))
    assert manifest is not None and str(manifest["code_hash"]).startswith("sha256:")


def test_a_snapshot_refuses_a_code_dir_with_a_link_on_its_way(tmp_path: pathlib.Path) -> None:
    src = code(tmp_path)
    (tmp_path / "via").symlink_to(tmp_path)
    paths = runs.RunPaths(tmp_path / "runs", "job-1")
    paths.make_attempt_dirs(1)
    with pytest.raises(errors.LaunchError, match="cannot snapshot code_dir"):
        runs.snapshot(tmp_path / "via" / src.name, paths.code_dir(1))
    assert not paths.code_dir(1).exists()
    assert not [p for p in paths.attempt_dir(1).iterdir() if p.name.startswith(".code")]


def test_logs_are_exported_but_not_a_planted_one(tmp_path: pathlib.Path) -> None:
    paths = runs.RunPaths(tmp_path / "runs", "job-1")
    paths.make_attempt_dirs(1)
    paths.log_path(1, "worker-0").write_text("mine\n")
    (tmp_path / "secret.txt").write_text("SECRET")
    paths.log_path(1, "worker-1").symlink_to(tmp_path / "secret.txt")
    dest = tmp_path / "exported"
    with pytest.raises(nofollow.Refused, match=r"worker-1\.log"):
        runs.export_logs(paths, 1, dest)
    assert (dest / "attempt-1" / "worker-0.log").read_text() == "mine\n"
    assert sorted(p.name for p in (dest / "attempt-1").iterdir()) == ["worker-0.log"]
