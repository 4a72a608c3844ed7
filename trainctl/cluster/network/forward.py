"""Listeners on the machine whose connections go into the isolated pod network.

Two things on the machine's own network need a way in: a kubelet's path to the API server
(a real kubelet reaches it over its node's network, so a cut cable cuts it off; here the
kubelet talks to a loopback listener of its own, and each connection is carried to the API
server by the cluster's router, which holds it while the node is partitioned: TLS runs end
to end, the serving certificate names 127.0.0.1), and a pod's ``hostPort`` (the machine's
port, forwarded to the pod's ``containerPort``, as a CNI portmap plugin does). Each is a
:class:`Forwarder`: a listening socket whose connections are spliced to a connection
``dial()`` opens.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import socket
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)


class Forwarder:
    """A listener on ``address`` whose connections are spliced to ``dial()``'s."""

    def __init__(self, dial: Callable[[], socket.socket], address: tuple[str, int] = ("127.0.0.1", 0)) -> None:
        self._dial = dial
        self._listener = socket.create_server(address)
        self.port: int = self._listener.getsockname()[1]
        self._thread = threading.Thread(target=self._accept, daemon=True, name=f"forward-{self.port}")

    def start(self) -> "Forwarder":
        self._thread.start()
        return self

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
            threading.Thread(target=self._splice, args=(client,), daemon=True, name="forward-conn").start()

    def _splice(self, client: socket.socket) -> None:
        try:
            upstream = self._dial()
        except Exception as exc:  # partitioned, the router is away, nothing listens: the client sees a reset
            log.debug("forwarding port %d: %s", self.port, exc)
            client.close()
            return
        upstream.settimeout(None)
        sockets = (client, upstream)
        back = threading.Thread(target=_copy, args=(upstream, client, sockets), daemon=True, name="forward-copy")
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


HostPort = tuple[int, str, int]  # (hostPort, pod IP, containerPort)


class HostPorts:
    """The machine's listeners for the hostPorts of a node's pods (TCP), kept in step with
    the pods the kubelet runs."""

    def __init__(self, dial: Callable[[str, int, float], socket.socket]) -> None:
        self._dial = dial
        self._open: dict[HostPort, Forwarder] = {}

    def sync(self, wanted: set[HostPort]) -> None:
        for rule in set(self._open) - wanted:
            self._open.pop(rule).stop()
        for rule in wanted - set(self._open):
            host_port, ip, port = rule
            try:
                self._open[rule] = Forwarder(functools.partial(self._dial, ip, port, 10.0),
                                             ("0.0.0.0", host_port)).start()
            except OSError as exc:
                log.warning("hostPort %d for %s:%d: %s", host_port, ip, port, exc)

    def stop(self) -> None:
        self.sync(set())
