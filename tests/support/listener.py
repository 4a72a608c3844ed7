"""A listener an attacker runs: it accepts connections and keeps every byte sent to it.

Pointed at by a Node's ``kubeletEndpoint``, it shows what the API server hands whoever a
Node names: with ``tls`` it completes a TLS handshake with that context first (an attacker
holding a certificate of the cluster's, another node's), and records what follows.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
from collections.abc import Iterator


class RecordingListener:
    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._server.getsockname()[1]
        self._tls = tls
        self.connections = 0
        self.received = b""
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._record, args=(connection,), daemon=True).start()

    def _record(self, connection: socket.socket) -> None:
        with self._lock:
            self.connections += 1
        connection.settimeout(10)
        with contextlib.suppress(OSError), contextlib.closing(connection):
            stream: socket.socket = connection
            if self._tls is not None:
                stream = self._tls.wrap_socket(connection, server_side=True)
            while chunk := stream.recv(65536):
                with self._lock:
                    self.received += chunk

    def close(self) -> None:
        self._server.close()


@contextlib.contextmanager
def recording_listener(tls: ssl.SSLContext | None = None) -> Iterator[RecordingListener]:
    listener = RecordingListener(tls)
    try:
        yield listener
    finally:
        listener.close()
