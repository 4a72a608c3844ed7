"""A kubelet's path to the API server in the isolated network: through the router.

A real kubelet reaches its API server over the node's network, so a cut cable cuts it off.
Here the kubelet runs on the machine's own network, where the API server always answers;
so in isolated mode its client talks to a loopback listener of its own, and every
connection accepted there is carried to the API server by the cluster's router
(:meth:`~.podnet.IsolatedNetwork.dial_apiserver`), which holds it while the node is
partitioned. TLS runs end to end (the serving certificate names 127.0.0.1).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)


class ApiPath:
    """A loopback listener whose connections are spliced to ``dial()``'s."""

    def __init__(self, dial: Callable[[], socket.socket]) -> None:
        self._dial = dial
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._thread = threading.Thread(target=self._accept, daemon=True, name="api-path")

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._splice, args=(client,), daemon=True, name="api-path-conn").start()

    def _splice(self, client: socket.socket) -> None:
        try:
            upstream = self._dial()
        except Exception as exc:  # partitioned, or the router is away: the client sees a reset
            log.debug("no path to the API server: %s", exc)
            client.close()
            return
        upstream.settimeout(None)
        sockets = (client, upstream)
        back = threading.Thread(target=_copy, args=(upstream, client, sockets), daemon=True, name="api-path-copy")
        back.start()
        _copy(client, upstream, sockets)
        back.join()
        for sock in sockets:
            sock.close()


def _copy(source: socket.socket, target: socket.socket, both: tuple[socket.socket, socket.socket]) -> None:
    try:
        while data := source.recv(65536):
            target.sendall(data)
        with contextlib.suppress(OSError):
            target.shutdown(socket.SHUT_WR)
    except OSError:
        for sock in both:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
