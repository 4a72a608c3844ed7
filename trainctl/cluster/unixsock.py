"""Unix sockets under a cluster directory, whatever the directory's length.

The isolated pod network lives in network namespaces of its own; a path-based unix socket
is what crosses them (the API server, the cluster's network router). A socket address holds
at most 107 bytes, and a cluster directory (a test's temporary directory, a home directory)
can be longer, so a long path is reached through ``/proc/self/fd/<dir fd>/<name>``: the
directory is opened, and the socket named relative to that descriptor.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator
from pathlib import Path

MAX_ADDRESS = 100  # sun_path is 108 bytes with its NUL; leave room


@contextlib.contextmanager
def short_path(path: Path) -> Iterator[str]:
    """A name for ``path`` short enough for a socket address, valid inside the block."""
    text = str(path)
    if len(text.encode()) <= MAX_ADDRESS:
        yield text
        return
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}/{path.name}"
    finally:
        os.close(fd)


def connect(path: Path, timeout: float | None = None) -> socket.socket:
    """A stream connection to the unix socket at ``path``."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        with short_path(path) as address:
            sock.connect(address)
    except BaseException:
        sock.close()
        raise
    return sock


def listen(path: Path, backlog: int = 128) -> socket.socket:
    """A listening unix socket at ``path`` (a stale socket file there is replaced)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with short_path(path) as address:
            sock.bind(address)
        os.chmod(path, 0o600)
        sock.listen(backlog)
    except BaseException:
        sock.close()
        raise
    return sock
