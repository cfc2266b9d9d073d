"""Where a notebook's session on a Ray node listens."""

from __future__ import annotations

import pathlib

from corral.kinds.notebooks import session


def test_a_ray_sessions_port_is_never_one_that_outgoing_connections_are_given() -> None:
    """The port is chosen before the session's node is known, and JupyterLab is told not
    to move to another: it must not be one that the node's own connections (Ray's, the
    jobs') take at random, or a session would fail now and then for nothing."""
    low, high = (int(n) for n in pathlib.Path(
        "/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    for _ in range(2000):
        port, token = session.tcp_session()
        assert 20000 <= port < low or port > high, (port, low, high)
        assert len(token) >= 32
