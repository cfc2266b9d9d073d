"""The ports a server takes: the API's and, apart from it, the notebooks' (an origin of
their own, docs/notebooks.md#opening-it)."""

from __future__ import annotations

import pathlib
import socket

import pytest

from corral import server
from corral.domain import errors
from tests import conftest


def _free_pair() -> tuple[int, socket.socket]:
    """A free port whose next one this test holds (as a second server's API would)."""
    while True:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        holder = socket.socket()
        try:
            holder.bind(("127.0.0.1", port + 1))
        except OSError:
            holder.close()
            continue
        holder.listen(1)
        return port, holder


def test_a_server_whose_next_port_is_taken_serves_notebooks_on_another(
        tmp_path: pathlib.Path) -> None:
    port, holder = _free_pair()
    try:
        emb = server.start_embedded(conftest.make_settings(tmp_path / "home"), port=port)
        try:
            taken = emb.platform.context.notebook_port
            assert taken not in (None, port, port + 1)
        finally:
            emb.stop()
    finally:
        holder.close()


def test_a_notebook_port_asked_for_and_taken_is_an_error(tmp_path: pathlib.Path) -> None:
    port, holder = _free_pair()
    try:
        settings = conftest.make_settings(tmp_path / "home", notebook_port=port + 1)
        with pytest.raises(errors.CorralError, match="notebook_port"):
            server.start_embedded(settings, port=port)
    finally:
        holder.close()
