"""The child process that does a job's file work with the rights of the user the job runs
as: copying its code into the attempt's snapshot, exporting its logs.

`python -I -S asuser.py <operation> [<uid> <gid>]`, a JSON request on stdin and a JSON
answer on stdout (see `main`). It drops to that user before it reads anything, so the
kernel checks that user's permissions: a root-only file cannot be read, a folder the user
may not write cannot be written; and it opens every path without following a link
(`corral.oskit.beneath`). It imports only the standard library and `beneath`, which it
loads as a plain file (corral's package tree is not on its path).

The server uses `tree_hash` too: a pipeline's cache key hashes code as a snapshot is hashed.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import stat
import subprocess
import sys
from collections.abc import Callable, Sequence
from typing import Any

if __package__:  # corral's module, as the server imports it
    from corral.oskit import beneath
else:  # run as a file: corral's package tree is not on the path, its oskit/ is put there
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))), "oskit"))
    import beneath  # type: ignore[no-redef]

#: a file opened for reading (O_NONBLOCK: opening a fifo must not wait for a writer)
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NOCTTY | os.O_NONBLOCK
#: a file written anew
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def copy_tree(src: int, dst: int, ignore: Sequence[str] = ()) -> None:
    """Copy folder `src` into the empty folder `dst` (descriptors): links are copied as
    links, never followed; names matching an `ignore` pattern are left out; set-id bits
    are dropped. A fifo, socket or device file stops the copy."""
    with os.scandir(src) as found:
        entries = sorted(found, key=lambda e: e.name)
    for e in entries:
        if any(fnmatch.fnmatch(e.name, pattern) for pattern in ignore):
            continue
        if e.is_symlink():
            os.symlink(os.readlink(e.name, dir_fd=src), e.name, dir_fd=dst)
        elif e.is_dir(follow_symlinks=False):
            sub = beneath.open_dir(e.name, start=src)
            try:
                os.mkdir(e.name, 0o700, dir_fd=dst)
                out = beneath.open_dir(e.name, start=dst)
                try:
                    copy_tree(sub, out, ignore)
                    os.fchmod(out, os.fstat(sub).st_mode & 0o777)
                finally:
                    os.close(out)
            finally:
                os.close(sub)
        else:
            _copy_file(src, dst, e.name)


def _copy_file(src: int, dst: int, name: str) -> None:
    fd = os.open(name, _READ, dir_fd=src)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise beneath.refused(name, "not a regular file (a fifo, socket or device)")
        os.set_blocking(fd, True)
        out = os.open(name, _NEW, 0o600, dir_fd=dst)
        try:
            beneath.pump(fd, out)
            os.fchmod(out, st.st_mode & 0o777)
            os.utime(out, ns=(st.st_atime_ns, st.st_mtime_ns))
        finally:
            os.close(out)
    finally:
        os.close(fd)


def tree_hash(root: int, ignore: Sequence[str] = ()) -> str:
    """`sha256:<hex>` over the relative paths, kinds and contents of every file in folder
    `root` (a descriptor), in the order of their relative paths; names matching an
    `ignore` pattern are left out.

    Names and bytes only (no times, no permissions but the executable bit), so the same
    code copied anywhere hashes the same.
    """
    h = hashlib.sha256()
    _hash_dir(h, root, "", ignore)
    return "sha256:" + h.hexdigest()


def _hash_dir(h: Any, fd: int, prefix: str, ignore: Sequence[str]) -> None:
    with os.scandir(fd) as found:
        entries = [e for e in found
                   if not any(fnmatch.fnmatch(e.name, pattern) for pattern in ignore)]
    # A folder's files follow on its name and a "/": visiting the entries in this order
    # visits the files in the order of their whole relative paths.
    folders = {e.name for e in entries if e.is_dir(follow_symlinks=False)}
    for e in sorted(entries, key=lambda e: e.name + "/" if e.name in folders else e.name):
        rel = prefix + e.name
        if e.is_symlink():
            h.update(_b(f"L {rel} -> {os.readlink(e.name, dir_fd=fd)}\0"))
        elif e.name in folders:
            sub = beneath.open_dir(e.name, start=fd, shown=rel)
            try:
                _hash_dir(h, sub, rel + "/", ignore)
            finally:
                os.close(sub)
        elif e.is_file(follow_symlinks=False):
            file = os.open(e.name, _READ, dir_fd=fd)
            try:
                st = os.fstat(file)
                os.set_blocking(file, True)
                mode = "x" if st.st_mode & 0o111 else "f"
                h.update(_b(f"{mode} {rel} {st.st_size}\0"))
                while chunk := os.read(file, beneath.CHUNK):
                    h.update(chunk)
            finally:
                os.close(file)


def _b(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def git_commit(src: str) -> str | None:
    """The commit checked out where `src` lies in a git work tree (`-dirty` when it has
    uncommitted changes), or None when it is in none or git is not installed."""
    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", "-C", src, *args], capture_output=True, text=True,
                                 timeout=10, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    commit = git("rev-parse", "--verify", "HEAD")
    if not commit:
        return None
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", ".")
    return f"{commit}-dirty" if dirty else commit


def snapshot(req: dict[str, Any]) -> dict[str, Any]:
    """Copy folder `src` to `<attempt_dir>/<tmp>`, write its `code_hash` and the
    `git_commit` of `src` into `<attempt_dir>/<manifest>`, then rename the copy `<name>`;
    answer the manifest. (In that order: a snapshot in place always has its manifest,
    whenever this process is killed.)"""
    src = beneath.open_dir(req["src"])
    try:
        att = beneath.open_dir(req["attempt_dir"])
        try:
            os.mkdir(req["tmp"], 0o700, dir_fd=att)
            out = beneath.open_dir(req["tmp"], start=att)
            try:
                copy_tree(src, out, req.get("ignore", ()))
                os.fchmod(out, os.fstat(src).st_mode & 0o777)
                manifest = {"code_hash": tree_hash(out), "git_commit": git_commit(req["src"])}
            finally:
                os.close(out)
            data = json.dumps(manifest).encode()
            beneath.replace(att, req["manifest"], lambda fd: beneath.write_all(fd, data))
            os.rename(req["tmp"], req["name"], src_dir_fd=att, dst_dir_fd=att)
        finally:
            os.close(att)
    finally:
        os.close(src)
    return manifest


def export(req: dict[str, Any]) -> dict[str, Any]:
    """Write each of `files` ([name, descriptor inherited from the parent]) into folder
    `dest`, made where missing; one whose copy is there already (a file of its size and
    time, which only a whole copy has: each is written aside, then renamed) is left, and
    the part of one that an export killed midway was writing aside is removed."""
    dest = beneath.open_dir(req["dest"], make=True)
    try:
        for name, fd in req["files"]:
            if "/" in name or name in ("", ".", ".."):
                raise ValueError(f"not a file name: {name!r}")
            # A copy an export killed in the middle left aside (the server stopped, say).
            beneath.drop_abandoned(dest, name)
            st = os.fstat(fd)
            if _copied(dest, name, st):
                continue

            def fill(out: int, fd: int = fd, st: os.stat_result = st) -> None:
                beneath.pump(fd, out)
                os.utime(out, ns=(st.st_atime_ns, st.st_mtime_ns))

            beneath.replace(dest, name, fill, st.st_mode & 0o777)
    finally:
        os.close(dest)
    return {}


def _copied(dest: int, name: str, st: os.stat_result) -> bool:
    try:
        there = os.stat(name, dir_fd=dest, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return (stat.S_ISREG(there.st_mode) and there.st_size == st.st_size
            and there.st_mtime_ns == st.st_mtime_ns)


OPERATIONS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "snapshot": snapshot, "export": export}


def main(argv: Sequence[str]) -> int:
    """`<operation> [<uid> <gid>]`: become that user first (the interpreter is started by
    the server's user: it may live where the job's user may not run it), then read the
    request from stdin and answer `{..}` or `{"error": ".."}` on stdout."""
    if len(argv) > 2:
        uid, gid = int(argv[2]), int(argv[3])
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
        if (os.getuid(), os.geteuid(), os.getgid(), os.getegid()) != (uid, uid, gid, gid):
            return 3
    request = json.load(sys.stdin)
    try:
        answer = OPERATIONS[argv[1]](request)
    except (OSError, ValueError) as exc:
        answer = {"error": str(exc)}
    json.dump(answer, sys.stdout)
    return 1 if "error" in answer else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
