"""High availability (docs/high-availability.md): SQLite stays one server's."""

from __future__ import annotations

import pathlib

import pytest

from corral import server
from tests.conftest import make_settings


def test_a_second_server_on_one_sqlite_database_refuses_to_start_and_says_why(
        tmp_path: pathlib.Path) -> None:
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    first = server.build(make_settings(tmp_path / "a", database_url=url))
    try:
        with pytest.raises(server.AlreadyRunning,
                           match="SQLite serves one server at a time.*PostgreSQL"):
            server.build(make_settings(tmp_path / "b", database_url=url))
    finally:
        first.stop()
    server.build(make_settings(tmp_path / "b", database_url=url)).stop()  # once it is gone


def test_a_second_server_on_one_sqlite_home_says_why(tmp_path: pathlib.Path) -> None:
    first = server.build(make_settings(tmp_path / "home"))
    try:
        with pytest.raises(server.AlreadyRunning, match="SQLite database serves one server"):
            server.build(make_settings(tmp_path / "home"))
    finally:
        first.stop()
