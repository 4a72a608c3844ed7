"""The router's control socket: one JSON request and one JSON answer per connection.

Kubelets, the supervisor and ``trainctl local node partition|heal`` talk to the cluster's
network router (:mod:`.router`) over ``DIR/run/network.sock``. An answer may carry one file
descriptor (SCM_RIGHTS): a TCP connection opened inside the pod network, which is how a
process outside it (the kubelet: port-forward, its own path to the API server) gets one.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any, Optional

from trainctl.cluster import unixsock

SOCKET = Path("run") / "network.sock"
UNKNOWN_NODE = "has no pod network"  # in the refusal of a request for a node the router does not know
MAX_ANSWER = 1 << 20

Message = dict[str, Any]


class RouterError(Exception):
    """The router refused a request, or could not be reached; one line for a log or the user."""


def request(directory: Path, message: Message, timeout: float = 30.0) -> tuple[Message, Optional[socket.socket]]:
    """Send ``message`` to the router of the cluster in ``directory``; its answer, and the
    connection it handed over (if any). Raises :class:`RouterError` on a refusal."""
    try:
        with unixsock.connect(directory / SOCKET, timeout) as sock:
            sock.sendall(json.dumps(message).encode() + b"\n")
            data, fds = b"", []
            while not data.endswith(b"\n"):
                chunk, received, _flags, _address = socket.recv_fds(sock, 65536, 1)
                fds += received
                if not chunk or len(data) > MAX_ANSWER:
                    break
                data += chunk
    except OSError as exc:
        raise RouterError(f"the cluster's network router does not answer ({exc.strerror or exc})") from None
    connection = socket.socket(fileno=fds[0]) if fds else None
    try:
        answer = json.loads(data or b"{}")
    except ValueError:
        answer = {"error": "the router sent an unreadable answer"}
    if not isinstance(answer, dict) or answer.get("error"):
        if connection is not None:
            connection.close()
        raise RouterError(str(answer.get("error") if isinstance(answer, dict) else answer))
    return answer, connection


def read_request(sock: socket.socket) -> Message:
    with sock.makefile("rb") as stream:
        line = stream.readline(MAX_ANSWER * 16)
    message = json.loads(line or b"{}")
    if not isinstance(message, dict):
        raise ValueError("a request is a JSON object")
    return message


def answer(sock: socket.socket, message: Message, connection: Optional[socket.socket] = None) -> None:
    data = json.dumps(message).encode() + b"\n"
    if connection is None:
        sock.sendall(data)
    else:
        socket.send_fds(sock, [data], [connection.fileno()])
