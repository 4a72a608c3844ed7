"""The userspace Service proxy: ClusterIP:port -> a ready endpoint's podIP:targetPort.

kube-proxy's oldest mode, on loopback: for every port of every ClusterIP Service it listens
on the Service's address and forwards each TCP connection to one ready endpoint, round
robin. The kubelet calls :meth:`ServiceProxy.update` with the full rule set whenever a
Service or a pod changes; listeners are opened and closed to match.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import threading
from typing import Optional

log = logging.getLogger(__name__)

Frontend = tuple[str, int]  # (cluster IP, port)
Backend = tuple[str, int]  # (pod IP, target port), or (unix socket path, 0)


class ServiceProxy:
    """Owns an event loop thread with one listening socket per Service port."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="service-proxy", daemon=True)
        self._servers: dict[Frontend, asyncio.AbstractServer] = {}
        self._backends: dict[Frontend, list[Backend]] = {}
        self._counters: dict[Frontend, itertools.count[int]] = {}
        self._lock = threading.Lock()
        self._closed = False

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        with self._lock:
            if self._closed or not self._thread.is_alive():
                self._closed = True
                return
            self._closed = True
            asyncio.run_coroutine_threadsafe(self._apply({}), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    def update(self, rules: dict[Frontend, list[Backend]]) -> None:
        """Make the listeners match ``rules`` (waits until done, so tests can rely on it)."""
        with self._lock:
            if not self._closed:
                asyncio.run_coroutine_threadsafe(self._apply(dict(rules)), self._loop).result(timeout=30)

    async def _apply(self, rules: dict[Frontend, list[Backend]]) -> None:
        # Only ports with a ready endpoint listen: without one a client gets "connection
        # refused", as with kube-proxy's REJECT rule, and can retry.
        rules = {frontend: backends for frontend, backends in rules.items() if backends}
        self._backends = rules
        for frontend in list(self._servers):
            if frontend not in rules:
                server = self._servers.pop(frontend)
                server.close()
                await server.wait_closed()
        for frontend in rules:
            if frontend in self._servers:
                continue
            host, port = frontend
            try:
                self._servers[frontend] = await asyncio.start_server(
                    functools.partial(self._forward, frontend), host, port, reuse_address=True)
            except OSError as exc:
                log.warning("service proxy cannot listen on %s:%d: %s", host, port, exc)

    def _pick(self, frontend: Frontend) -> Optional[Backend]:
        backends = self._backends.get(frontend) or []
        if not backends:
            return None
        counter = self._counters.setdefault(frontend, itertools.count())
        return backends[next(counter) % len(backends)]

    async def _connect(self, frontend: Frontend) -> Optional[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
        """Like kube-proxy's userspace mode: try the endpoints in turn, backing off, for a few
        seconds (a pod counts as ready as soon as it runs, maybe before it listens)."""
        delay = 0.05
        for _ in range(8):
            backend = self._pick(frontend)
            if backend is None:
                return None
            host, port = backend
            try:
                return await (asyncio.open_unix_connection(host) if port == 0 else asyncio.open_connection(host, port))
            except OSError:
                await asyncio.sleep(delay)
                delay *= 2
        return None

    async def _forward(self, frontend: Frontend, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream = await self._connect(frontend)
        if upstream is None:
            writer.transport.abort()  # a reset, the closest we can get to "refused" now
            return
        upstream_reader, upstream_writer = upstream
        writers = (writer, upstream_writer)
        await asyncio.gather(_pipe(reader, upstream_writer, writers), _pipe(upstream_reader, writer, writers))
        for each in writers:
            each.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                both: tuple[asyncio.StreamWriter, asyncio.StreamWriter]) -> None:
    """Copy one direction; pass a half-close on, and tear both down on an error."""
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        for each in both:
            each.close()
