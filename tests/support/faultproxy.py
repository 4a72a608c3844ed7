"""A fault-injecting HTTP proxy between the controller and the real embedded API server.

It forwards every request untouched, except that it (deterministically, from a seed):
- answers a share of ordinary requests itself with 500, 429 (with ``Retry-After``) or, for
  PUTs, 409 Conflict, as an overloaded or contended API server does; and, on request, the
  first status writes of each object with 409, as a concurrent writer would cause;
- cuts watch streams after a few events, as a load balancer or an API server restart does.

Nothing is simulated beyond the failure: answers that get through come from the real server.
"""

from __future__ import annotations

import http.client
import json
import random
import socket
import ssl
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

HOP_HEADERS = {
    "connection",
    "keep-alive",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "proxy-authorization",
    "proxy-authenticate",
}


def _status(code: int, reason: str, message: str) -> bytes:
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    return json.dumps(body).encode()


class FaultProxy:
    def __init__(
        self,
        upstream: str,
        *,
        error_rate: float = 0.0,
        drop_watch_after: int = 0,
        seed: int = 7,
        retry_after: int = 0,
        ssl_context: ssl.SSLContext | None = None,
        status_conflicts: int = 0,
        script: list[int] | None = None,
        before_status_conflict: Callable[[str], None] | None = None,
    ) -> None:
        parsed = urllib.parse.urlsplit(upstream)
        self.upstream_tls = parsed.scheme == "https"
        self.ssl_context = ssl_context
        self.upstream_host = parsed.hostname or "127.0.0.1"
        self.upstream_port = parsed.port or 80
        self.error_rate = error_rate
        self.drop_watch_after = drop_watch_after
        self.retry_after = retry_after
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self.injected: dict[int, int] = {}
        # The first ``status_conflicts`` PUTs to each .../status path get 409 Conflict.
        self.status_conflicts = status_conflicts
        self._status_puts: dict[str, int] = {}
        self.status_conflicts_sent = 0
        # Called with the path before an injected status conflict: make the conflict real.
        self.before_status_conflict = before_status_conflict
        # Answers for the next non-watch requests, in order (e.g. [429, 500]); then normal.
        self.script = list(script or [])
        self.requests: list[tuple[str, str]] = []  # (method, path) of every non-watch request
        self._upstreams: set[socket.socket] = set()
        self.dropped_watches = 0
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
                is_watch = query.get("watch", ["false"])[0].lower() in ("true", "1")
                if not is_watch:
                    fault = proxy._pick_fault(self.command, urllib.parse.urlsplit(self.path).path)
                    if fault is not None:
                        self._reply(*fault)
                        return
                if proxy.upstream_tls:
                    conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                        proxy.upstream_host, proxy.upstream_port, timeout=600, context=proxy.ssl_context
                    )
                else:
                    conn = http.client.HTTPConnection(proxy.upstream_host, proxy.upstream_port, timeout=600)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_HEADERS and k.lower() != "host"}
                conn.connect()
                sock = conn.sock
                with proxy._lock:
                    proxy._upstreams.add(sock)
                conn.request(self.command, self.path, body=body, headers=headers)
                upstream = conn.getresponse()
                if is_watch and upstream.status == 200:
                    self._stream(upstream)
                else:
                    data = upstream.read()
                    self.send_response(upstream.status)
                    for k, v in upstream.getheaders():
                        if k.lower() not in HOP_HEADERS and k.lower() != "content-length":
                            self.send_header(k, v)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                conn.close()
                with proxy._lock:
                    proxy._upstreams.discard(sock)

            def _reply(self, code: int, reason: str, extra: dict[str, str]) -> None:
                data = _status(code, reason, f"injected by the fault proxy: {reason}")
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in extra.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, upstream: http.client.HTTPResponse) -> None:
                self.send_response(200)
                self.send_header("Content-Type", upstream.getheader("Content-Type") or "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                events = 0
                try:
                    while True:
                        line = upstream.readline()
                        if not line:
                            break
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                        self.wfile.flush()
                        events += 1
                        if proxy.drop_watch_after and events >= proxy.drop_watch_after:
                            with proxy._lock:
                                proxy.dropped_watches += 1
                            self.close_connection = True
                            return  # cut mid-stream: no terminating chunk
                    self.wfile.write(b"0\r\n\r\n")
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def _pick_fault(self, method: str, path: str) -> tuple[int, str, dict[str, str]] | None:
        with self._lock:
            self.requests.append((method, path))
            if self.script:
                code = self.script.pop(0)
                self.injected[code] = self.injected.get(code, 0) + 1
                reason = {429: "TooManyRequests", 409: "Conflict", 500: "InternalError", 503: "ServiceUnavailable"}.get(
                    code, "Injected"
                )
                return code, reason, {"Retry-After": str(self.retry_after)} if code == 429 else {}
            if method == "PUT" and path.endswith("/status") and self.status_conflicts:
                seen = self._status_puts.get(path, 0)
                self._status_puts[path] = seen + 1
                if seen < self.status_conflicts:
                    self.status_conflicts_sent += 1
                    if self.before_status_conflict is not None:
                        self.before_status_conflict(path)
                    return 409, "Conflict", {}
            if self._random.random() >= self.error_rate:
                return None
            choices = [(500, "InternalError", {}), (429, "TooManyRequests", {"Retry-After": str(self.retry_after)})]
            if method == "PUT":
                choices.append((409, "Conflict", {}))
            code, reason, headers = self._random.choice(choices)
            self.injected[code] = self.injected.get(code, 0) + 1
            return code, reason, headers

    def __enter__(self) -> "FaultProxy":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        with self._lock:
            upstreams = list(self._upstreams)
        for sock in upstreams:  # open watches would keep the API server from stopping
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
