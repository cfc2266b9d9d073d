"""The run directory's folders, reads and copies (storage/runs.py, and the child that copies
as the job's user, storage/asuser.py): never through a link a job planted."""

from __future__ import annotations

import os
import pathlib
import subprocess

import pytest

from corral.domain import errors
from corral.oskit import beneath
from corral.storage import runs


def test_a_log_behind_a_planted_link_or_a_fifo_is_read_as_empty(tmp_path: pathlib.Path) -> None:
    paths = runs.RunPaths(tmp_path / "runs", "job-1")
    paths.make_attempt_dirs(1)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "worker-0.log").write_text("NOT-MINE")
    logs = paths.attempt_dir(1) / "logs"
    logs.rmdir()
    logs.symlink_to(tmp_path / "elsewhere")
    assert runs.tail(paths.log_path(1, "worker-0"), 100) == (b"", 0)
    assert runs.read_from(paths.log_path(1, "worker-0"), 0, 100) == (b"", 0, 0)
    logs.unlink()
    logs.mkdir()
    os.mkfifo(paths.log_path(1, "worker-1"))
    assert runs.tail(paths.log_path(1, "worker-1"), 100) == (b"", 0)


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
    with pytest.raises(beneath.Refused, match=planted):
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


def test_a_snapshot_in_place_has_its_manifest_whenever_its_maker_is_killed(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The copy's manifest is written before the copy takes its name: a server killed
    right after the rename (a relaunch then reuses the snapshot) left one without its
    code hash and commit."""
    from corral.storage import asuser

    src = code(tmp_path)
    paths = runs.RunPaths(tmp_path / "runs", "job-1")
    paths.make_attempt_dirs(1)
    att = paths.attempt_dir(1)
    seen: dict[str, dict[str, str | None] | None] = {}
    rename = os.rename

    def killed_after(a: str, b: str, **kw: int) -> None:
        rename(a, b, **kw)
        if b == paths.code_dir(1).name:  # (what the process had written when it died)
            seen["manifest"] = runs.read_code_manifest(att)
            raise KeyboardInterrupt

    monkeypatch.setattr(asuser.os, "rename", killed_after)
    with pytest.raises(KeyboardInterrupt):
        asuser.snapshot({"src": str(src), "attempt_dir": str(att), "tmp": ".code.tmp-1",
                         "name": paths.code_dir(1).name, "ignore": runs.SNAPSHOT_IGNORE,
                         "manifest": runs.CODE_MANIFEST})
    monkeypatch.undo()
    found = seen["manifest"]
    assert found is not None and str(found["code_hash"]).startswith("sha256:")
    runs.snapshot(src, paths.code_dir(1))  # the relaunch reuses it, manifest and all
    assert runs.read_code_manifest(att) == found


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
    with pytest.raises(beneath.Refused, match=r"worker-1\.log"):
        runs.export_logs(paths, 1, dest)
    assert (dest / "attempt-1" / "worker-0.log").read_text() == "mine\n"
    assert sorted(p.name for p in (dest / "attempt-1").iterdir()) == ["worker-0.log"]


def test_an_exported_log_is_copied_again_only_when_it_differs(tmp_path: pathlib.Path) -> None:
    # An attempt's logs are exported as it ends and again as its job is finished (in case
    # a server killed in between made no copy): the second export leaves a whole copy be.
    paths = runs.RunPaths(tmp_path / "runs", "job-1")
    paths.make_attempt_dirs(1)
    paths.log_path(1, "worker-0").write_text("mine\n")
    dest = tmp_path / "exported"
    runs.export_logs(paths, 1, dest)
    copy = dest / "attempt-1" / "worker-0.log"
    first = copy.stat().st_ino

    runs.export_logs(paths, 1, dest)
    assert copy.stat().st_ino == first

    copy.write_text("min")  # a copy cut short, or changed since
    runs.export_logs(paths, 1, dest)
    assert copy.read_text() == "mine\n" and copy.stat().st_ino != first


def test_an_export_removes_what_an_export_killed_midway_left_aside(
        tmp_path: pathlib.Path) -> None:
    # An export writes each copy aside (.<name>.tmp-<pid>) and renames it whole; one killed
    # in between (its server killed) left that part in the user's folder.
    paths = runs.RunPaths(tmp_path / "runs", "job-1")
    paths.make_attempt_dirs(1)
    paths.log_path(1, "worker-0").write_text("mine\n")
    gone = subprocess.Popen(["true"])
    gone.wait()
    folder = tmp_path / "exported" / "attempt-1"
    folder.mkdir(parents=True)
    (folder / f".worker-0.log.tmp-{gone.pid}").write_text("mi")
    (folder / f".worker-0.log.tmp-{os.getpid()}").write_text("m")  # its writer still runs
    (folder / f".other.log.tmp-{gone.pid}").write_text("not one of these logs")

    runs.export_logs(paths, 1, tmp_path / "exported")

    assert sorted(p.name for p in folder.iterdir()) == [
        f".other.log.tmp-{gone.pid}", f".worker-0.log.tmp-{os.getpid()}", "worker-0.log"]
    assert (folder / "worker-0.log").read_text() == "mine\n"
