"""Room kept for the database on the disk of CORRAL_HOME.

Jobs write their logs within a cap, and no job starts while the disk is below its free
floor (`disk_free_floor_gb`); but running jobs may still fill the disk with what they
write elsewhere on it (outputs under the project's tree, say). The server then must still
be able to record what happens to them. A reserve file of `disk_reserve_mb` is kept in
CORRAL_HOME while the disk is above its floor, and removed the moment it is not: its room
goes to the database's writes. It is made again once the disk has room for it and the
floor both.
"""

from __future__ import annotations

import logging
import os
import pathlib
import shutil

log = logging.getLogger(__name__)
NAME = "disk-reserve"


class Reserve:
    def __init__(self, home: pathlib.Path, size_bytes: int, floor_bytes: int) -> None:
        self.path = home / NAME
        self.size = size_bytes
        self.floor = floor_bytes

    def keep(self) -> None:
        """Release the reserve when the disk is below its floor; make it when the disk has
        room for it above the floor. Cheap (a statvfs) when nothing changes."""
        if not self.size:
            return
        home = self.path.parent
        if not home.is_dir():
            return
        free = shutil.disk_usage(home).free
        if self.path.exists():
            if free < self.floor:
                self.path.unlink(missing_ok=True)
                log.warning("the disk of %s is below its floor (%.1f GiB free): its %d MB "
                            "reserve was released for the database", home, free / 2**30,
                            self.size >> 20)
        elif free >= self.floor + self.size:
            self._make()

    def _make(self) -> None:
        tmp = self.path.with_name(f".{NAME}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            try:
                os.posix_fallocate(fd, 0, self.size)  # real blocks, not a sparse file
            finally:
                os.close(fd)
            os.replace(tmp, self.path)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            log.warning("cannot keep a disk reserve in %s: %s", self.path.parent, exc)
