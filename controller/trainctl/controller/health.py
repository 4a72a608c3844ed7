"""The probe endpoints: ``/healthz`` (the process is alive) and ``/readyz`` (caches synced).

A liveness probe that fails restarts the pod, so ``/healthz`` only checks that the serving
loop and the informer threads are alive; readiness additionally waits for every informer's
first list, the moment the controller can make decisions.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable


class HealthServer:
    def __init__(self, host: str, port: int, healthy: Callable[[], bool], ready: Callable[[], bool]) -> None:
        checks = {"/healthz": healthy, "/readyz": ready, "/livez": healthy}

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                check = checks.get(self.path.split("?", 1)[0])
                if check is None:
                    self.send_error(404)
                    return
                ok = check()
                body = b"ok\n" if ok else b"not ready\n"
                self.send_response(200 if ok else 503)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass  # probes every few seconds would drown the decision log

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="health", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
