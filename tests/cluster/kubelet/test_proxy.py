"""The userspace Service proxy forwards ClusterIP:port to a backend and follows rule changes."""

import socket
import socketserver
import threading

import pytest

from trainctl.cluster.network.proxy import ServiceProxy


class Echo(socketserver.StreamRequestHandler):
    def handle(self):
        self.wfile.write(self.server.greeting + self.rfile.readline())


@pytest.fixture
def backend():
    server = socketserver.ThreadingTCPServer(("127.128.9.1", 0), Echo)
    server.greeting = b"from backend: "
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address
    server.shutdown()
    server.server_close()


def ask(address):
    with socket.create_connection(address, timeout=5) as conn:
        conn.sendall(b"hi\n")
        return conn.makefile("rb").readline()


def test_forwards_and_follows_changes(backend):
    proxy = ServiceProxy()
    proxy.start()
    try:
        with socket.socket() as probe:  # a free port on the service address
            probe.bind(("127.96.9.1", 0))
            port = probe.getsockname()[1]
        frontend = ("127.96.9.1", port)
        proxy.update({frontend: [backend]})
        assert ask(frontend) == b"from backend: hi\n"
        proxy.update({frontend: []})  # no ready endpoint: refused, so clients retry
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(frontend, timeout=5)
        proxy.update({frontend: [backend]})
        assert ask(frontend) == b"from backend: hi\n"
        proxy.update({})
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(frontend, timeout=5)
    finally:
        proxy.stop()
