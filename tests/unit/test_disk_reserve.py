"""The reserve file that keeps room for the database: made while the disk is above its
floor, released the moment it is not, made again once there is room (a real disk; the
floor is what moves)."""

from __future__ import annotations

import pathlib
import shutil

from corral.storage import reserve

MB = 2**20


def test_the_reserve_is_kept_above_the_floor_and_released_below_it(
        tmp_path: pathlib.Path) -> None:
    free = shutil.disk_usage(tmp_path).free
    kept = reserve.Reserve(tmp_path, 4 * MB, floor_bytes=0)
    kept.keep()
    assert kept.path.stat().st_size == 4 * MB
    assert kept.path.stat().st_blocks * 512 >= 4 * MB  # real blocks, not a sparse file
    low = reserve.Reserve(tmp_path, 4 * MB, floor_bytes=free + 1024 * MB)  # "below the floor"
    low.keep()
    assert not low.path.exists()
    low.keep()  # no room for it above the floor: not made again
    assert not low.path.exists()
    kept.keep()  # room again
    assert kept.path.exists()


def test_no_reserve_when_its_size_is_zero(tmp_path: pathlib.Path) -> None:
    none = reserve.Reserve(tmp_path, 0, floor_bytes=0)
    none.keep()
    assert not none.path.exists()
