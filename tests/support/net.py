"""Ports for servers a test starts (a controller's metrics, a rendezvous store, a pod's server)."""

from __future__ import annotations

import socket


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now at ``host`` (``0.0.0.0``: on any address of
    this machine, which other test runs may share)."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]
